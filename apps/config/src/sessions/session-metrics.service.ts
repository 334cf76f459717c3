import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { MetricsService } from '@tessera/platform';
import { SessionsStore } from './sessions.store.js';

/** `tessera_logical_sessions_active` on `/metrics`: rows of the sessions table, counted at each scrape. */
@Injectable()
export class SessionMetricsService {
  readonly activeSessions: Gauge;

  constructor(metrics: MetricsService, store: SessionsStore) {
    this.activeSessions = new Gauge({
      name: 'tessera_logical_sessions_active',
      help: 'Logical sessions in the sessions table (used within the timeout and not ended)',
      registers: [metrics.registry],
      // A failed count keeps the last value: the rest of the scrape must not fail with the database.
      async collect() {
        const count = await store.count().catch(() => undefined);
        if (count !== undefined) this.set(count);
      },
    });
  }
}
