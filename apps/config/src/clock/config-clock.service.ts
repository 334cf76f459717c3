import { Injectable, type OnModuleInit } from '@nestjs/common';
import {
  DataSource,
  type EntityManager,
  type EntitySubscriberInterface,
  type QueryRunner,
  type TransactionCommitEvent,
  type TransactionRollbackEvent,
} from 'typeorm';
import { type ClusterTimestamp, type VectorTime, laterClusterTime, tickClusterTime } from '@tessera/core';
import { VectorClockService } from '@tessera/platform';

/** The components the config server ticks and stores (ClusterTime is the shards' to tick). */
type CatalogTime = Pick<VectorTime, 'configTime' | 'topologyTime'>;

interface ClockRow {
  config_time_t: string;
  config_time_i: string;
  topology_time_t: string;
  topology_time_i: string;
}

/**
 * The config server ticks the vector clock: ConfigTime on every catalog write and TopologyTime,
 * set to that write's ConfigTime, when a shard is added or removed. The clock row is locked by
 * the writing transaction, so ticks are strictly increasing across config processes and a write
 * and its tick commit or roll back together. The time this node gossips moves only when the
 * transaction commits: a node told a newer time must find the write that made it.
 */
@Injectable()
export class ConfigClockService implements OnModuleInit, EntitySubscriberInterface {
  private readonly pending = new WeakMap<QueryRunner, CatalogTime>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: VectorClockService,
  ) {}

  async onModuleInit(): Promise<void> {
    this.dataSource.subscribers.push(this);
    const rows: ClockRow[] = await this.dataSource.query('SELECT * FROM vector_clock');
    if (rows[0] !== undefined) this.clock.advance(timeOf(rows[0]));
  }

  /**
   * Ticks ConfigTime (and TopologyTime when `topology`) inside `manager`'s transaction and
   * returns the new times; the commit's ConfigTime is `configTime`.
   */
  async tick(manager: EntityManager, options: { topology?: boolean } = {}): Promise<CatalogTime> {
    const rows: ClockRow[] = await manager.query('SELECT * FROM vector_clock FOR UPDATE');
    const stored = timeOf(rows[0]!);
    // Past every ClusterTime this node was told of (which is at least its ConfigTime): a commit's
    // ConfigTime, e.g. a migration's validAfter, is then later than every write its sender had seen.
    const configTime = tickClusterTime(laterClusterTime(stored.configTime, this.clock.now().clusterTime), Date.now() / 1000);
    const topologyTime = options.topology ? configTime : stored.topologyTime;
    await manager.query('UPDATE vector_clock SET config_time_t = $1, config_time_i = $2, topology_time_t = $3, topology_time_i = $4', [
      configTime.t,
      configTime.i,
      topologyTime.t,
      topologyTime.i,
    ]);
    const time = { configTime, topologyTime };
    if (manager.queryRunner?.isTransactionActive) this.pending.set(manager.queryRunner, time);
    else this.clock.advance(time);
    return time;
  }

  afterTransactionCommit(event: TransactionCommitEvent): void {
    const time = this.pending.get(event.queryRunner);
    if (time === undefined) return;
    this.pending.delete(event.queryRunner);
    this.clock.advance(time);
  }

  afterTransactionRollback(event: TransactionRollbackEvent): void {
    this.pending.delete(event.queryRunner);
  }

  now(): VectorTime {
    return this.clock.now();
  }
}

function timeOf(row: ClockRow): CatalogTime {
  const ts = (t: string, i: string): ClusterTimestamp => ({ t: Number(t), i: Number(i) });
  return { configTime: ts(row.config_time_t, row.config_time_i), topologyTime: ts(row.topology_time_t, row.topology_time_i) };
}
