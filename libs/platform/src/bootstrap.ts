import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import type { DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { LogController } from 'fastify';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { guardInternalRoutes } from './cluster-auth.guard.js';
import { HealthService } from './health.js';
import { type HotRoute, serveHotRoutes } from './hot-routes.js';
import { PinoNestLogger, createLogger } from './logger.js';
import { MetricsService } from './metrics.js';
import { TesseraExceptionFilter } from './error.filter.js';
import { SettingsError, advertisedUrl, loadSettings } from './settings.js';
import { VectorClockService } from './vector-clock.service.js';
import { serveWire } from './wire-server.js';
import { type TlsFiles, serverTls } from './tls.js';

/** sysexits.h EX_CONFIG: the process refused to start because of its configuration. */
export const EXIT_BAD_CONFIG = 78;
/** MongoDB's limit on one message (48 MiB) bounds request bodies too. */
const MAX_BODY_BYTES = 48 * 1024 * 1024;

export interface NodeDefinition<S extends z.ZodObject> {
  role: 'config' | 'shard' | 'router';
  settingsSchema: S;
  /** Work before the app starts, e.g. migrations; its failure stops the process. */
  prepare?: (settings: Readonly<z.output<S>>, logger: Logger) => Promise<void>;
  module: (settings: Readonly<z.output<S>>, logger: Logger) => DynamicModule;
  /** Work on the app before its routes are served, e.g. Fastify hooks that every route should run. */
  configure?: (app: NestFastifyApplication, node: { settings: Readonly<z.output<S>>; logger: Logger; url: string }) => void | Promise<void>;
  /** The data path's routes that Fastify serves outside Nest's pipeline (see `HotRoute`). */
  hotRoutes?: (app: NestFastifyApplication) => readonly HotRoute[];
  /** Serve the internal wire beside HTTP (see wire-server.ts): the shard does, for `ShardClient`. */
  wire?: boolean;
  /**
   * How long the node stays in quiesce mode on SIGTERM before it stops (a router's
   * mongosShutdownTimeoutMillisForSignaledShutdown): it serves on while `hello` sends clients
   * elsewhere. None: it stops at once.
   */
  quiesceMs?: (settings: Readonly<z.output<S>>) => number;
}

export interface RunningNode {
  app: NestFastifyApplication;
  url: string;
  logger: Logger;
}

/**
 * Starts one node: validates settings (exit 78 naming the bad settings), runs `prepare`, creates
 * the Nest app on Fastify with request ids, JSON logs, metrics and the error filter, listens,
 * and on SIGTERM or SIGINT shuts down gracefully: readiness turns false, the server stops
 * accepting and finishes in-flight requests, pools close; past the shutdown timeout it exits 1.
 */
export async function runNode<S extends z.ZodObject>(definition: NodeDefinition<S>): Promise<RunningNode> {
  let settings: Readonly<z.output<S>>;
  let https: { cert: Buffer; key: Buffer } | undefined;
  try {
    settings = loadSettings(definition.settingsSchema, process.env);
    https = serverTls(settings as TlsFiles);
  } catch (error) {
    if (error instanceof SettingsError) {
      process.stderr.write(`tessera-${definition.role}: ${error.message}\n`);
      process.exit(EXIT_BAD_CONFIG);
    }
    throw error;
  }
  const common = settings as unknown as {
    TESSERA_HOST: string;
    TESSERA_PORT: number;
    TESSERA_ADVERTISE_URL?: string;
    TESSERA_NODE_NAME?: string;
    TESSERA_LOG_LEVEL: string;
    TESSERA_SHUTDOWN_TIMEOUT_MS: number;
    TESSERA_STOP_ON_STDIN_CLOSE: boolean;
  };
  const url = advertisedUrl(common);
  const logger = createLogger(common.TESSERA_NODE_NAME ?? `${definition.role}@${new URL(url).host}`, common.TESSERA_LOG_LEVEL);
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled promise rejection'));

  try {
    await definition.prepare?.(settings, logger);
    const adapter = new FastifyAdapter({
      loggerInstance: logger,
      // Per-request lines would double the cost of the data path; failures are logged by the filter.
      logController: new LogController({ disableRequestLogging: true }),
      requestIdHeader: 'x-request-id',
      genReqId: () => randomUUID(),
      bodyLimit: MAX_BODY_BYTES,
      return503OnClosing: true,
      ...(https === undefined ? {} : { https }),
    });
    const app = await NestFactory.create<NestFastifyApplication>(definition.module(settings, logger), adapter, {
      rawBody: true,
      logger: new PinoNestLogger(logger),
      abortOnError: false,
    });
    app.useGlobalFilters(new TesseraExceptionFilter(logger));
    instrument(app, app.get(MetricsService));
    const clusterKey = (settings as unknown as { TESSERA_CLUSTER_KEY: string }).TESSERA_CLUSTER_KEY;
    guardInternalRoutes(app.getHttpAdapter().getInstance(), app.get(VectorClockService), clusterKey);
    await definition.configure?.(app, { settings, logger, url });
    const hotRoutes = definition.hotRoutes?.(app) ?? [];
    serveHotRoutes(app, hotRoutes, clusterKey, logger);
    if (definition.wire === true) serveWire(app, hotRoutes, { clusterKey, logger, maxBodyBytes: MAX_BODY_BYTES });
    await app.listen({ port: common.TESSERA_PORT, host: common.TESSERA_HOST });
    logger.info({ url, role: definition.role }, `tessera ${definition.role} listening on ${url}`);
    handleSignals(app, logger, {
      timeoutMs: common.TESSERA_SHUTDOWN_TIMEOUT_MS,
      quiesceMs: definition.quiesceMs?.(settings) ?? 0,
      stopOnStdinClose: common.TESSERA_STOP_ON_STDIN_CLOSE,
    });
    return { app, url, logger };
  } catch (error) {
    logger.fatal({ err: error }, `tessera ${definition.role} failed to start: ${(error as Error).message}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    process.exit(1);
  }
}

function instrument(app: NestFastifyApplication, metrics: MetricsService): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onSend', async (request, reply, payload) => {
    void reply.header('x-request-id', request.id);
    return payload;
  });
  fastify.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.httpDuration.observe({ method: request.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  });
}

function handleSignals(
  app: NestFastifyApplication,
  logger: Logger,
  options: { timeoutMs: number; quiesceMs: number; stopOnStdinClose: boolean },
): void {
  const { timeoutMs, quiesceMs, stopOnStdinClose } = options;
  let stopping = false;
  const stop = async (signal: NodeJS.Signals | 'stdin closed') => {
    if (stopping) return;
    stopping = true;
    const health = app.get(HealthService);
    health.markShuttingDown();
    // SIGTERM asks for a graceful stop: first the quiesce period, serving on while clients move.
    if (signal === 'SIGTERM' && quiesceMs > 0) {
      logger.info({ signal, quiesceMs }, `received ${signal}: quiescing for ${quiesceMs} ms before shutting down`);
      health.quiesce(quiesceMs);
      await new Promise((resolve) => setTimeout(resolve, quiesceMs));
    }
    logger.info({ signal }, `received ${signal}, shutting down`);
    const force = setTimeout(() => {
      logger.error(`shutdown did not finish within ${timeoutMs} ms; exiting`);
      process.exit(1);
    }, timeoutMs);
    force.unref();
    app.close().then(
      () => {
        logger.info('stopped');
        logger.flush();
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', (signal) => void stop(signal));
  process.once('SIGINT', (signal) => void stop(signal));
  if (stopOnStdinClose) {
    process.stdin.on('data', () => undefined);
    process.stdin.once('end', () => void stop('stdin closed'));
  }
}
