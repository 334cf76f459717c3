import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { ImageKind, StatementResult } from '../documents/statement-history.js';

/** A statement to record: its stmtId, the written document's encoded shard key when known, its answer. */
export interface StatementRecord {
  stmtId: number;
  shardKey: Uint8Array | undefined;
  result: StatementResult;
}

/**
 * The shard's transactions table and its retry history: `txn_records` (config.transactions),
 * `txn_statements` (the executed statements of each session's current txnNumber) and
 * `txn_images` (config.image_collection). Every method runs in the caller's transaction, so
 * that a write and its record commit together.
 */
@Injectable()
export class TransactionsStore {
  /**
   * Locks the session's row for the rest of the caller's transaction, creating it at
   * `txnNumber` when the session has none, and bumps its last write; answers the txnNumber
   * stored. (Insert-if-missing and SELECT ... FOR UPDATE in one statement: the conflict's
   * update takes the row lock.)
   */
  async lockSession(manager: EntityManager, lsid: string, txnNumber: number): Promise<number> {
    const rows: Array<{ txn_number: string }> = await manager.query(
      `INSERT INTO txn_records (lsid, txn_number, last_write_at) VALUES ($1, $2, now())
       ON CONFLICT (lsid) DO UPDATE SET last_write_at = now() RETURNING txn_number`,
      [lsid, txnNumber],
    );
    return Number(rows[0]!.txn_number);
  }

  /**
   * Moves a locked session to a newer txnNumber and forgets the statements and image of the
   * older one: only the latest retryable write of a session can be retried.
   */
  async startTxnNumber(manager: EntityManager, lsid: string, txnNumber: number): Promise<void> {
    // One round trip: data-modifying CTEs run whether or not the query reads them.
    await manager.query(
      `WITH advanced AS (UPDATE txn_records SET txn_number = $2, last_write_at = now() WHERE lsid = $1),
            statements AS (DELETE FROM txn_statements WHERE lsid = $1 AND txn_number <> $2),
            images AS (DELETE FROM txn_images WHERE lsid = $1 AND txn_number <> $2)
       SELECT 1`,
      [lsid, txnNumber],
    );
  }

  /** The recorded results of those of `stmtIds` that executed under the session's `txnNumber`. */
  async executedStatements(
    manager: EntityManager,
    lsid: string,
    txnNumber: number,
    stmtIds: readonly number[],
  ): Promise<Map<number, StatementResult>> {
    const rows: Array<{ stmt_id: number; result: StatementResult }> = await manager.query(
      'SELECT stmt_id, result FROM txn_statements WHERE lsid = $1 AND txn_number = $2 AND stmt_id = ANY($3::int[])',
      [lsid, txnNumber, stmtIds],
    );
    return new Map(rows.map((r) => [r.stmt_id, r.result]));
  }

  /** The findAndModify image recorded under the session's `txnNumber`, if any. */
  async image(manager: EntityManager, lsid: string, txnNumber: number): Promise<{ kind: ImageKind; document: unknown } | undefined> {
    const rows: Array<{ image_kind: ImageKind; image: unknown }> = await manager.query(
      'SELECT image_kind, image FROM txn_images WHERE lsid = $1 AND txn_number = $2',
      [lsid, txnNumber],
    );
    return rows[0] && { kind: rows[0].image_kind, document: rows[0].image };
  }

  /**
   * Records executed statements of the session's `txnNumber`, locking the session's row and
   * bumping its last write. Answers false, recording nothing, when the session is no longer at
   * `txnNumber` (or has no row). A statement recorded twice violates the primary key, which
   * aborts the caller's transaction: a statement never applies twice.
   */
  async recordStatements(
    manager: EntityManager,
    lsid: string,
    txnNumber: number,
    collectionUuid: string,
    statements: readonly StatementRecord[],
  ): Promise<boolean> {
    const rows: unknown[] = await manager.query(
      `WITH session AS (UPDATE txn_records SET last_write_at = now() WHERE lsid = $1 AND txn_number = $2 RETURNING lsid)
       INSERT INTO txn_statements (lsid, txn_number, stmt_id, collection_uuid, shard_key, result)
       SELECT s.lsid, $2, u.stmt_id, $3, u.shard_key, u.result
       FROM session s, ROWS FROM (unnest($4::int[]), unnest($5::bytea[]), json_array_elements($6::json)) AS u(stmt_id, shard_key, result)
       RETURNING stmt_id`,
      [
        lsid,
        txnNumber,
        collectionUuid,
        statements.map((s) => s.stmtId),
        statements.map((s) => (s.shardKey === undefined ? null : Buffer.isBuffer(s.shardKey) ? s.shardKey : Buffer.from(s.shardKey))),
        JSON.stringify(statements.map((s) => s.result)),
      ],
    );
    return rows.length === statements.length;
  }

  /** Records a findAndModify's image, replacing the session's previous one. */
  async recordImage(manager: EntityManager, lsid: string, txnNumber: number, kind: ImageKind, document: unknown): Promise<void> {
    await manager.query(
      `INSERT INTO txn_images (lsid, txn_number, image_kind, image) VALUES ($1, $2, $3, $4)
       ON CONFLICT (lsid) DO UPDATE SET txn_number = EXCLUDED.txn_number, image_kind = EXCLUDED.image_kind, image = EXCLUDED.image`,
      [lsid, txnNumber, kind, JSON.stringify(document)],
    );
  }

  /** Sessions whose last retryable write is older than `cutoff`, oldest first (the reaper's candidates). */
  async staleSessions(manager: EntityManager, cutoff: Date, limit: number): Promise<string[]> {
    const rows: Array<{ lsid: string }> = await manager.query(
      'SELECT lsid FROM txn_records WHERE last_write_at < $1 ORDER BY last_write_at LIMIT $2',
      [cutoff, limit],
    );
    return rows.map((r) => r.lsid);
  }

  /**
   * Forgets the sessions' records, statements and images, unless a write touched a session after
   * `cutoff` (it was used again while the reaper asked the config server); answers those reaped.
   */
  async reapSessions(manager: EntityManager, lsids: readonly string[], cutoff: Date): Promise<string[]> {
    const rows: Array<{ lsid: string }> = await manager.query(
      `WITH reaped AS (DELETE FROM txn_records WHERE lsid = ANY($1::uuid[]) AND last_write_at < $2 RETURNING lsid),
            statements AS (DELETE FROM txn_statements WHERE lsid IN (SELECT lsid FROM reaped)),
            images AS (DELETE FROM txn_images WHERE lsid IN (SELECT lsid FROM reaped))
       SELECT lsid FROM reaped`,
      [lsids, cutoff],
    );
    return rows.map((r) => r.lsid);
  }
}
