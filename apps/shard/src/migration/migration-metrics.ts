import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import { MetricsService } from '@tessera/platform';

/** The shard's migration counters on /metrics, like the `shardingStatistics` of MongoDB's serverStatus. */
@Injectable()
export class MigrationMetrics {
  readonly started: Counter;
  readonly committed: Counter;
  readonly aborted: Counter;
  readonly documentsCloned: Counter;
  readonly bytesCloned: Counter;
  readonly criticalSection: Histogram;
  readonly rangeDeletionsPending: Gauge;
  readonly documentsDeleted: Counter;

  constructor(metrics: MetricsService) {
    const registers = [metrics.registry];
    this.started = new Counter({ name: 'tessera_migrations_started_total', help: 'Migrations this shard started as donor', registers });
    this.committed = new Counter({ name: 'tessera_migrations_committed_total', help: 'Migrations this shard donated that committed', registers });
    this.aborted = new Counter({ name: 'tessera_migrations_aborted_total', help: 'Migrations this shard donated that aborted', registers });
    this.documentsCloned = new Counter({
      name: 'tessera_migration_documents_cloned_total',
      help: 'Documents this shard cloned as recipient',
      registers,
    });
    this.bytesCloned = new Counter({ name: 'tessera_migration_bytes_cloned_total', help: 'Bytes this shard cloned as recipient', registers });
    this.criticalSection = new Histogram({
      name: 'tessera_migration_critical_section_seconds',
      help: 'How long this shard held a donor critical section',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      registers,
    });
    this.rangeDeletionsPending = new Gauge({
      name: 'tessera_range_deletions_pending',
      help: 'Range deletions recorded on this shard and not finished (pending or scheduled)',
      registers,
    });
    this.documentsDeleted = new Counter({
      name: 'tessera_range_deleter_documents_deleted_total',
      help: 'Orphaned documents the range deleter removed',
      registers,
    });
  }
}
