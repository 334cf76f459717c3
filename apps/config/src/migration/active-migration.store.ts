import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { MigrationDecision } from '@tessera/protocol';
import { type Queryable, queryRows } from '@tessera/platform';

/** A migration as `active_migrations` records it, with its shards' URLs. */
export interface MigrationRecord {
  id: string;
  ns: string;
  collectionUuid: string;
  min: Buffer;
  max: Buffer;
  minEjson: string;
  maxEjson: string;
  donor: string;
  donorUrl: string;
  recipient: string;
  recipientUrl: string;
  reason: string | null;
  startedAt: Date;
}

/** What `register` writes: the record without what the database and the shard registry add, with the request's options. */
export interface NewMigrationRecord extends Omit<MigrationRecord, 'donorUrl' | 'recipientUrl' | 'startedAt'> {
  forceJumbo: boolean;
  waitForDelete: boolean;
}

interface RecordRow {
  id: string;
  ns: string;
  collection_uuid: string;
  min: Buffer;
  max: Buffer;
  min_ejson: string;
  max_ejson: string;
  donor: string;
  donor_url: string;
  recipient: string;
  recipient_url: string;
  reason: string | null;
  started_at: Date;
}

const SELECT_RECORDS = `SELECT a.id, a.ns, a.collection_uuid, a.min, a.max, a.min_ejson, a.max_ejson, a.donor, d.url AS donor_url,
       a.recipient, r.url AS recipient_url, a.reason, a.started_at
  FROM active_migrations a JOIN shards d ON d.name = a.donor JOIN shards r ON r.name = a.recipient`;

/**
 * The config server's migration records (`active_migrations`, one per chunk being moved) and
 * decisions (`migration_decisions`, one per migration that reached its commit or was settled
 * without one).
 *
 * Invariant: a record goes only once its migration can no longer commit: after its donor
 * answered (it ran the migration to its end, or never ran it) or said it finished it (`remove`),
 * or together with a recorded decision (`settle`). A decision stays unless its donor answered success: a donor that
 * restarts without knowing its decision asks for it (`decide`), and must never be told `aborted`
 * for a commit that landed.
 */
@Injectable()
export class ActiveMigrationStore {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * Records a migration, only while its collection allows migrations (FOR SHARE makes a DDL that
   * turns them off wait for this insert, and this insert see the DDL's change), and only when no
   * record holds the chunk. Answers whether it was recorded.
   */
  async register(record: NewMigrationRecord): Promise<boolean> {
    const inserted = await queryRows(
      this.dataSource,
      `INSERT INTO active_migrations (id, ns, collection_uuid, min, max, min_ejson, max_ejson, donor, recipient, force_jumbo, wait_for_delete, reason)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 FROM collections WHERE uuid = $3 AND allow_migrations FOR SHARE
       ON CONFLICT DO NOTHING RETURNING id`,
      [
        record.id,
        record.ns,
        record.collectionUuid,
        record.min,
        record.max,
        record.minEjson,
        record.maxEjson,
        record.donor,
        record.recipient,
        record.forceJumbo,
        record.waitForDelete,
        record.reason,
      ],
    );
    return inserted.length > 0;
  }

  async allowsMigrations(collectionUuid: string): Promise<boolean> {
    const rows = await queryRows(this.dataSource, 'SELECT 1 FROM collections WHERE uuid = $1 AND allow_migrations', [collectionUuid]);
    return rows.length > 0;
  }

  /** The record of the chunk of `collectionUuid` that starts at `min`. */
  async ofChunk(collectionUuid: string, min: Buffer): Promise<MigrationRecord | undefined> {
    const rows = await queryRows<RecordRow>(this.dataSource, `${SELECT_RECORDS} WHERE a.collection_uuid = $1 AND a.min = $2`, [
      collectionUuid,
      min,
    ]);
    return rows[0] && recordOfRow(rows[0]);
  }

  async ofCollection(collectionUuid: string): Promise<MigrationRecord[]> {
    return (await queryRows<RecordRow>(this.dataSource, `${SELECT_RECORDS} WHERE a.collection_uuid = $1`, [collectionUuid])).map(
      recordOfRow,
    );
  }

  /** How many migrations are recorded now, whoever issued them. */
  async count(): Promise<number> {
    const [row] = await queryRows<{ n: string }>(this.dataSource, 'SELECT count(*) AS n FROM active_migrations');
    return Number(row!.n);
  }

  /** Records started at least `ageMs` ago, by the database's clock, oldest first. */
  async olderThan(ageMs: number): Promise<MigrationRecord[]> {
    const rows = await queryRows<RecordRow>(
      this.dataSource,
      `${SELECT_RECORDS} WHERE a.started_at <= now() - make_interval(secs => $1) ORDER BY a.started_at`,
      [ageMs / 1000],
    );
    return rows.map(recordOfRow);
  }

  /** Drops a record whose donor answered or said it finished: its migration has ended there. Answers whether one went. */
  async remove(id: string): Promise<boolean> {
    return (await queryRows(this.dataSource, 'DELETE FROM active_migrations WHERE id = $1 RETURNING id', [id])).length > 0;
  }

  /** The decision of migration `id`, recording `aborted` when none was made, so a commit still in flight can no longer land. */
  async decide(db: Queryable, id: string): Promise<MigrationDecision> {
    await db.query(`INSERT INTO migration_decisions (id, decision) VALUES ($1, 'aborted') ON CONFLICT (id) DO NOTHING`, [id]);
    const [row] = await queryRows<{ decision: MigrationDecision }>(db, 'SELECT decision FROM migration_decisions WHERE id = $1', [id]);
    return row!.decision;
  }

  /** Drops a record and its decision once its donor answered success: nobody will ask for the decision. */
  async forget(id: string): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await manager.query('DELETE FROM active_migrations WHERE id = $1', [id]);
      await manager.query('DELETE FROM migration_decisions WHERE id = $1', [id]);
    });
  }

  /**
   * Records that migration `id` commits, on `db` in the commit's transaction. Answers false when
   * it had already committed (a retried commit), and undefined when it was decided aborted (its
   * donor recovered and asked before this commit arrived, or the record was settled).
   */
  async recordCommit(db: Queryable, id: string): Promise<boolean | undefined> {
    const inserted = await queryRows(
      db,
      `INSERT INTO migration_decisions (id, decision) VALUES ($1, 'committed') ON CONFLICT (id) DO NOTHING RETURNING id`,
      [id],
    );
    if (inserted.length > 0) return true;
    const [row] = await queryRows<{ decision: MigrationDecision }>(db, 'SELECT decision FROM migration_decisions WHERE id = $1', [id]);
    return row?.decision === 'committed' ? false : undefined;
  }

  /** Why migration `id` was started (the balancer's reason), read on `db`. */
  async reasonOf(db: Queryable, id: string): Promise<string | undefined> {
    const [row] = await queryRows<{ reason: string | null }>(db, 'SELECT reason FROM active_migrations WHERE id = $1', [id]);
    return row?.reason ?? undefined;
  }

  /**
   * The decision of migration `id`, recording `aborted` when none was made, so a commit still in
   * flight can no longer land; then the record goes (on `db`, in the caller's transaction).
   * Answers the decision and whether a record was dropped.
   */
  async settle(db: Queryable, id: string): Promise<{ decision: MigrationDecision; removed: boolean }> {
    const decision = await this.decide(db, id);
    const removed = await queryRows(db, 'DELETE FROM active_migrations WHERE id = $1 RETURNING id', [id]);
    return { decision, removed: removed.length > 0 };
  }
}

function recordOfRow(row: RecordRow): MigrationRecord {
  return {
    id: row.id,
    ns: row.ns,
    collectionUuid: row.collection_uuid,
    min: row.min,
    max: row.max,
    minEjson: row.min_ejson,
    maxEjson: row.max_ejson,
    donor: row.donor,
    donorUrl: row.donor_url,
    recipient: row.recipient,
    recipientUrl: row.recipient_url,
    reason: row.reason,
    startedAt: row.started_at,
  };
}

/** Migrations recorded with `shard` as donor or recipient, read on `db` (inside a caller's transaction). */
export function migrationsInvolving(
  db: Queryable,
  shard: string,
): Promise<Array<{ id: string; ns: string; donor: string; recipient: string }>> {
  return queryRows(db, 'SELECT id, ns, donor, recipient FROM active_migrations WHERE donor = $1 OR recipient = $1 ORDER BY started_at', [
    shard,
  ]);
}
