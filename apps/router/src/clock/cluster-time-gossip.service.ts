import { Inject, Injectable } from '@nestjs/common';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { TesseraError, checkClusterTimeDrift, compareClusterTimestamps } from '@tessera/core';
import { ClusterTimeKeyCache, InternalClients, LOGGER, SETTINGS, VectorClockService, sendError } from '@tessera/platform';
import type { RouterSettings } from '../router.settings.js';
import { clusterTimeFromWire, clusterTimeToWire, timestampToWire } from './cluster-time-wire.js';

/**
 * ClusterTime gossip with clients (sharding-internals.md, "ClusterTime gossiping",
 * "SignedComponentFormat"): every answer of the public API carries `$clusterTime`, this router's
 * ClusterTime signed with the current key, and `operationTime`; a request may carry the
 * `$clusterTime` its client last saw, which advances this router's clock only once its signature
 * verifies and it is within `TESSERA_MAX_ACCEPTABLE_LOGICAL_CLOCK_DRIFT_SECS` of the wall clock.
 *
 * `operationTime` is this router's ClusterTime when the answer goes out: at or after the time
 * of every write the command made (the shards tick before they answer, and their answers
 * advance this clock), so reading after it sees them.
 */
@Injectable()
export class ClusterTimeGossip {
  private readonly keys: ClusterTimeKeyCache;

  constructor(
    @Inject(SETTINGS) private readonly settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly clock: VectorClockService,
    internal: InternalClients,
  ) {
    const config = internal.config(settings.TESSERA_CONFIG_URL);
    this.keys = new ClusterTimeKeyCache(() => config.clusterTimeKeys());
  }

  /** Installs the gossip on the public API's routes (under `/v1/`); call before the app listens. */
  install(fastify: FastifyInstance): void {
    fastify.addHook('preHandler', async (request, reply) => {
      if (!request.url.startsWith('/v1/')) return;
      const body = request.body as Record<string, unknown> | undefined;
      if (body === null || typeof body !== 'object' || !('$clusterTime' in body)) return;
      const received = body.$clusterTime;
      delete body.$clusterTime;
      try {
        await this.advance(received);
      } catch (error) {
        sendError(request, reply, error, this.logger);
        return reply;
      }
      return undefined;
    });
    fastify.addHook('preSerialization', async (request, _reply, payload: unknown) => {
      if (!request.url.startsWith('/v1/') || payload === null || typeof payload !== 'object' || Array.isArray(payload)) return payload;
      const time = this.clock.now().clusterTime;
      const signed = this.keys.sign(time);
      return {
        ...payload,
        operationTime: timestampToWire(time),
        ...(signed === undefined ? {} : { $clusterTime: clusterTimeToWire(signed) }),
      };
    });
  }

  /** Advances this router's ClusterTime to a client's `$clusterTime`, once it proved itself. */
  async advance(received: unknown): Promise<void> {
    const signed = clusterTimeFromWire(received);
    // Not ahead of what this router has: nothing to prove (MongoDB checks only a newer time).
    if (compareClusterTimestamps(signed.clusterTime, this.clock.now().clusterTime) <= 0) return;
    try {
      checkClusterTimeDrift(signed.clusterTime, Date.now() / 1000, this.settings.TESSERA_MAX_ACCEPTABLE_LOGICAL_CLOCK_DRIFT_SECS);
    } catch (error) {
      if (error instanceof TesseraError) this.logger.warn({ details: error.details }, `refused a client's $clusterTime: ${error.message}`);
      throw error;
    }
    await this.keys.verify(signed);
    this.clock.advance({ clusterTime: signed.clusterTime });
  }
}
