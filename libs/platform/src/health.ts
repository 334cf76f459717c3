import { randomUUID } from 'node:crypto';
import { Controller, Get, Injectable, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';

/** A readiness dependency: resolves when healthy, rejects with the reason when not. */
export interface HealthCheck {
  name: string;
  check(): Promise<void>;
}

export interface CheckResult {
  ok: boolean;
  latencyMs: number;
  error?: string;
}

export interface HealthReport {
  status: 'ok' | 'unavailable';
  live: true;
  ready: boolean;
  checks: Record<string, CheckResult>;
}

const CHECK_TIMEOUT_MS = 2_000;

/** Liveness is "the process answers"; readiness is every registered check passing. */
@Injectable()
export class HealthService {
  private readonly checks: HealthCheck[] = [];
  private shuttingDown = false;
  private quiescingUntil: number | undefined;
  /**
   * MongoDB's TopologyVersion: this process's id and a counter raised on every change a client
   * must notice (entering quiesce mode).
   */
  private readonly topology = { processId: randomUUID(), counter: 0 };

  /** Adds a readiness dependency (database, config server, ...). */
  register(check: HealthCheck): void {
    this.checks.push(check);
  }

  /** After this, readiness is false so load balancers stop sending traffic. */
  markShuttingDown(): void {
    this.shuttingDown = true;
  }

  /**
   * Quiesce mode before a shutdown (a router's, as mongos): operations still run for `ms`, but
   * `hello` tells clients to go to another node; the topology version changes.
   */
  quiesce(ms: number): void {
    this.quiescingUntil = Date.now() + ms;
    this.topology.counter++;
  }

  /** Milliseconds of quiesce mode left, or undefined when not quiescing. */
  quiesceRemainingMs(): number | undefined {
    return this.quiescingUntil === undefined ? undefined : Math.max(0, this.quiescingUntil - Date.now());
  }

  get topologyVersion(): { processId: string; counter: number } {
    return { ...this.topology };
  }

  async report(): Promise<HealthReport> {
    const entries = await Promise.all(this.checks.map(async (c) => [c.name, await runCheck(c)] as const));
    const checks = Object.fromEntries(entries);
    if (this.shuttingDown) checks.shutdown = { ok: false, latencyMs: 0, error: 'shutting down' };
    const ready = Object.values(checks).every((c) => c.ok);
    return { status: ready ? 'ok' : 'unavailable', live: true, ready, checks };
  }
}

async function runCheck(check: HealthCheck): Promise<CheckResult> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check.check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
      }),
    ]);
    return { ok: true, latencyMs: Math.round(performance.now() - started) };
  } catch (error) {
    return { ok: false, latencyMs: Math.round(performance.now() - started), error: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

@Controller('health')
export class HealthController {
  constructor(private readonly health: HealthService) {}

  /** Liveness and readiness together: 200 when ready, 503 otherwise. */
  @Get()
  async all(@Res() reply: FastifyReply): Promise<void> {
    const report = await this.health.report();
    await reply.status(report.ready ? 200 : 503).send(report);
  }

  @Get('live')
  live(): { live: true } {
    return { live: true };
  }

  @Get('ready')
  async ready(@Res() reply: FastifyReply): Promise<void> {
    await this.all(reply);
  }
}
