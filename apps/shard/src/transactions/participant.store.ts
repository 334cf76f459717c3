import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import type { ClusterTimestamp } from '@tessera/core';
import type { Participant, TransactionId } from '@tessera/protocol';
import { type WriteTime, clusterTimeFromSql, clusterTimeToSql } from '../history/write-time.js';

/** The documents a transaction wrote in one collection: their `_id`s and shard keys, encoded. */
export interface WrittenDocuments {
  ns: string;
  collectionUuid: string;
  table: string;
  ids: Buffer[];
  shardKeys: Buffer[];
}

/** A transaction prepared on this shard, as its Postgres global transaction id names it. */
export interface PreparedTransaction {
  id: TransactionId;
  commitTime: ClusterTimestamp;
  coordinator: Participant;
  gid: string;
  /** The coordinator's database, when it handed it out: kept in memory only, not in the id. */
  coordinatorStorage?: string;
}

const GID_PREFIX = 'tessera';
/** A transaction's connection is named `tessera-txn:<lsid>:<txnNumber>` while it is open. */
const TRANSACTION_NAME_PREFIX = 'tessera-txn:';
/** Postgres's undefined_object: COMMIT/ROLLBACK PREPARED of an id no longer prepared. */
const NOT_PREPARED = '42704';

/**
 * The participant's SQL (sharding-internals.md, "Two-phase Commit Protocol"). A transaction's
 * statements run in one Postgres transaction held across requests; prepare restamps what it
 * wrote with the commit time and makes it durable with PREPARE TRANSACTION, named by a global
 * transaction id that says everything recovery needs: the transaction, its commit time and its
 * coordinator.
 */
@Injectable()
export class ParticipantStore {
  /** This shard's database: global transaction ids are the Postgres server's, shared by every database on it. */
  private database: string | undefined;

  constructor(private readonly dataSource: DataSource) {}

  /**
   * Opens the transaction's Postgres transaction: READ COMMITTED, since its reads name their
   * snapshot themselves (`readRelation`) and must see versions committed after it began with a
   * time before the snapshot; statements that would wait on another transaction's lock give up
   * after `lockTimeoutMs`; the snapshot time is declared as the write time, which commit
   * replaces; and the connection carries the transaction's `name` as its application_name, so
   * that a lock wait shows which transaction waits for which (`blockersOf`).
   */
  async begin(manager: EntityManager, snapshot: WriteTime, lockTimeoutMs: number, name: string): Promise<void> {
    // One round trip: every value written into the text is a number we made (or on/off), or a
    // transaction name of a uuid and a number.
    if (!/^-?\d+$/.test(snapshot.sql)) throw new Error(`not a write time: ${snapshot.sql}`);
    if (!/^[\w:-]+$/.test(name)) throw new Error(`not a transaction name: ${name}`);
    await manager.query(
      `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))}; ` +
        `SELECT set_config('tessera.write_time', '${snapshot.sql}', true), set_config('tessera.keep_history', '${snapshot.keepHistory ? 'on' : 'off'}', true), ` +
        `set_config('application_name', '${TRANSACTION_NAME_PREFIX}${name}', true)`,
    );
  }

  /**
   * What the connection of transaction `name` waits for, if it waits on a lock: its backend and
   * the names of the transactions holding the lock, null for a holder that is none of this
   * shard's open transactions (a prepared one, a write outside transactions, a migration).
   */
  async blockersOf(name: string): Promise<{ pid: number; blockers: Array<string | null> } | undefined> {
    const rows: Array<{ pid: number; holder: string | null }> = await this.dataSource.query(
      `SELECT w.pid, h.application_name AS holder
       FROM pg_stat_activity w
       CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS b(pid)
       LEFT JOIN pg_stat_activity h ON h.pid = b.pid
       WHERE w.application_name = $1 AND w.datname = current_database()`,
      [`${TRANSACTION_NAME_PREFIX}${name}`],
    );
    if (rows.length === 0) return undefined;
    return {
      pid: rows[0]!.pid,
      blockers: rows.map((r) => (r.holder?.startsWith(TRANSACTION_NAME_PREFIX) ? r.holder.slice(TRANSACTION_NAME_PREFIX.length) : null)),
    };
  }

  /** Cancels the statement backend `pid` runs (a lock wait's victim). */
  async cancel(pid: number): Promise<void> {
    await this.dataSource.query('SELECT pg_cancel_backend($1)', [pid]);
  }

  /**
   * Stamps what the transaction wrote with its commit time: its rows' `valid_from`, and the end of
   * each version it replaced (the kept versions its own Postgres transaction inserted), and
   * records the session's transaction as committed, which becomes true only if this does.
   */
  async restamp(
    manager: EntityManager,
    id: TransactionId,
    written: readonly WrittenDocuments[],
    commitTime: ClusterTimestamp,
  ): Promise<void> {
    const time = clusterTimeToSql(commitTime);
    for (const { collectionUuid, table, ids, shardKeys } of written) {
      await manager.query(`UPDATE ${table} SET valid_from = $2 WHERE id = ANY($1::bytea[])`, [ids, time]);
      await manager.query(
        `UPDATE document_history SET valid_to = $3
         WHERE collection_uuid = $1 AND shard_key = ANY($2::bytea[]) AND xmin = pg_current_xact_id()::xid`,
        [collectionUuid, shardKeys, time],
      );
    }
    await manager.query(
      `INSERT INTO txn_records (lsid, txn_number, last_write_at, txn_state, commit_time) VALUES ($1, $2, now(), 'committed', $3)
       ON CONFLICT (lsid) DO UPDATE SET txn_number = $2, last_write_at = now(), txn_state = 'committed', commit_time = $3,
         collection_uuid = NULL, stmt_ids = '{}', shard_keys = '{}', results = '{}'
       WHERE txn_records.txn_number <= $2`,
      [id.lsid.id, id.txnNumber, time],
    );
  }

  async prepare(manager: EntityManager, prepared: Omit<PreparedTransaction, 'gid'>): Promise<PreparedTransaction> {
    this.database ??= ((await manager.query('SELECT current_database() AS name')) as Array<{ name: string }>)[0]!.name;
    const gid = gidOf(this.database, prepared);
    await manager.query(`PREPARE TRANSACTION '${gid}'`);
    return { ...prepared, gid };
  }

  async commitPrepared(gid: string): Promise<void> {
    await this.finishPrepared(`COMMIT PREPARED '${gid}'`);
  }

  async rollbackPrepared(gid: string): Promise<void> {
    await this.finishPrepared(`ROLLBACK PREPARED '${gid}'`);
  }

  /**
   * Ends a prepared transaction. One no longer prepared was ended by a peer while this shard's
   * process was down, by the same decision (every resolver takes it from the coordinator's
   * record), so it is done.
   */
  private async finishPrepared(sql: string): Promise<void> {
    try {
      await this.dataSource.query(sql);
    } catch (error) {
      if ((error as { code?: string }).code !== NOT_PREPARED) throw error;
    }
  }

  /**
   * The latest commit time of a transaction committed here: a restarted shard's clock starts
   * past it, since a peer may have committed this shard's prepared transactions while it was down.
   */
  async latestCommitTime(): Promise<ClusterTimestamp | undefined> {
    const rows: Array<{ latest: string | null }> = await this.dataSource.query(
      "SELECT max(commit_time)::text AS latest FROM txn_records WHERE txn_state = 'committed'",
    );
    return rows[0]?.latest == null ? undefined : clusterTimeFromSql(rows[0].latest);
  }

  /** The transactions prepared on this shard's database and not yet resolved. */
  async preparedTransactions(): Promise<PreparedTransaction[]> {
    const rows: Array<{ gid: string }> = await this.dataSource.query(
      `SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND gid LIKE '${GID_PREFIX}:%'`,
    );
    return rows.map((r) => parseGid(r.gid));
  }

  /** Whether the session's record says this transaction committed. */
  async committed(id: TransactionId): Promise<boolean> {
    return (await this.committedAt(id)) !== undefined;
  }

  /** The commit time the session's record gives this transaction, if it committed here. */
  async committedAt(id: TransactionId): Promise<ClusterTimestamp | undefined> {
    const rows: Array<{ commit_time: string }> = await this.dataSource.query(
      "SELECT commit_time FROM txn_records WHERE lsid = $1 AND txn_number = $2 AND txn_state = 'committed'",
      [id.lsid.id, id.txnNumber],
    );
    return rows[0] && clusterTimeFromSql(rows[0].commit_time);
  }
}

/**
 * `tessera:<database>:<lsid>:<txnNumber>:<t>.<i>:<coordinator shard>:<coordinator url>`: the
 * participant's database first, since the ids of every database of the Postgres server share one
 * namespace. Every part is ours (a database and shard name, a uuid, integers and the URL the
 * cluster registered), written into SQL text; `gidOf` checks them.
 */
export function gidOf(database: string, prepared: Omit<PreparedTransaction, 'gid'>): string {
  const { id, commitTime, coordinator } = prepared;
  const gid = `${GID_PREFIX}:${database}:${id.lsid.id}:${id.txnNumber}:${commitTime.t}.${commitTime.i}:${coordinator.shard}:${coordinator.url}`;
  if (!/^[\w:./-]+$/.test(gid) || gid.length > 199) throw new Error(`cannot name a prepared transaction ${gid}`);
  return gid;
}

export function parseGid(gid: string): PreparedTransaction {
  const [, , lsid, txnNumber, time, shard, ...url] = gid.split(':');
  const [t, i] = time!.split('.').map(Number);
  return {
    gid,
    id: { lsid: { id: lsid! }, txnNumber: Number(txnNumber) },
    commitTime: { t: t!, i: i! },
    coordinator: { shard: shard!, url: url.join(':') },
  };
}
