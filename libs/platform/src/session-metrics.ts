import { Counter, Gauge } from 'prom-client';
import type { LogicalSessionCache } from './logical-session-cache.js';
import type { MetricsService } from './metrics.js';

/** A node's logical sessions on /metrics: those in its cache, and the retried statements it answered from history. */
export class SessionMetrics {
  readonly retriedStatements: Counter;

  constructor(metrics: MetricsService, cache: LogicalSessionCache) {
    const registers = [metrics.registry];
    new Gauge({
      name: 'tessera_logical_session_cache_entries',
      help: "Logical sessions in this node's cache (used since they last expired or ended)",
      registers,
      collect() {
        this.set(cache.size);
      },
    });
    this.retriedStatements = new Counter({
      name: 'tessera_retryable_write_statements_retried_total',
      help: "Statements of retryable writes answered from the session's history instead of run again",
      registers,
    });
  }
}
