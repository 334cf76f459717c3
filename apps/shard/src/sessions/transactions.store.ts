import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { MigratedSession } from '@tessera/protocol';
import type { ImageKind, StatementResult } from '../documents/statement-history.js';

/** The range of a collection whose documents' retry history moves with a migration (encoded shard keys, max excluded). */
export interface HistoryRange {
  collectionUuid: string;
  min: Buffer;
  max: Buffer;
}

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

  /**
   * The retry history of the documents in `range` (MongoDB's `_getNextSessionMods`): up to
   * `limit` sessions after `afterLsid`, in lsid order, each with its current txnNumber, those
   * of that txnNumber's statements whose shard key lies in the range, and its image of that
   * txnNumber. Statements of an older txnNumber cannot be retried and do not move; a statement
   * without a shard key (an update or delete that matched nothing) belongs to no range.
   */
  async sessionHistoryInRange(
    manager: EntityManager,
    range: HistoryRange,
    afterLsid: string | undefined,
    limit: number,
  ): Promise<MigratedSession[]> {
    const rows: Array<{
      lsid: string;
      txn_number: string;
      last_write_at: Date;
      statements: MigratedSession['statements'];
      image_kind: 'preImage' | 'postImage' | null;
      image: string | null;
    }> = await manager.query(
      `WITH moving AS (
         SELECT s.lsid, s.txn_number,
                json_agg(json_build_object('stmtId', s.stmt_id, 'shardKey', encode(s.shard_key, 'hex'), 'result', s.result::text)
                         ORDER BY s.stmt_id) AS statements
         FROM txn_statements s JOIN txn_records r ON r.lsid = s.lsid AND r.txn_number = s.txn_number
         WHERE s.collection_uuid = $1 AND s.shard_key >= $2 AND s.shard_key < $3 AND ($4::uuid IS NULL OR s.lsid > $4::uuid)
         GROUP BY s.lsid, s.txn_number ORDER BY s.lsid LIMIT $5)
       SELECT m.lsid, m.txn_number, r.last_write_at, m.statements, i.image_kind, i.image::text AS image
       FROM moving m JOIN txn_records r ON r.lsid = m.lsid
       LEFT JOIN txn_images i ON i.lsid = m.lsid AND i.txn_number = m.txn_number
       ORDER BY m.lsid`,
      [range.collectionUuid, range.min, range.max, afterLsid ?? null, limit],
    );
    return rows.map((r) => ({
      lsid: r.lsid,
      txnNumber: Number(r.txn_number),
      lastWriteAt: r.last_write_at.toISOString(),
      statements: r.statements,
      ...(r.image_kind !== null && r.image !== null ? { image: { kind: r.image_kind, document: r.image } } : {}),
    }));
  }

  /**
   * Applies migrated history of the collection `collectionUuid`, in the caller's transaction.
   * Per session: a session here at a HIGHER txnNumber keeps its own history and ignores the
   * migrated one (a retry of the older txnNumber is refused anyway); at an equal txnNumber the
   * migrated statements join its own; at a lower one (or none) it moves to the migrated
   * txnNumber, forgetting its older statements and image, as `startTxnNumber` does. Upserts on
   * the primary keys make applying the same history again change nothing. Answers the lsids
   * whose history was taken.
   */
  async applyMigratedSessions(manager: EntityManager, collectionUuid: string, sessions: readonly MigratedSession[]): Promise<string[]> {
    if (sessions.length === 0) return [];
    const sorted = [...sessions].sort((a, b) => (a.lsid < b.lsid ? -1 : a.lsid > b.lsid ? 1 : 0));
    // Rows are locked in lsid order, as a live write locks one: no lock cycle with writes.
    const adopted: Array<{ lsid: string }> = await manager.query(
      `INSERT INTO txn_records (lsid, txn_number, last_write_at)
       SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::timestamptz[]) ORDER BY 1
       ON CONFLICT (lsid) DO UPDATE SET txn_number = EXCLUDED.txn_number,
         last_write_at = GREATEST(txn_records.last_write_at, EXCLUDED.last_write_at)
       WHERE txn_records.txn_number <= EXCLUDED.txn_number
       RETURNING lsid`,
      [sorted.map((s) => s.lsid), sorted.map((s) => s.txnNumber), sorted.map((s) => s.lastWriteAt)],
    );
    const taken = new Set(adopted.map((r) => r.lsid));
    const accepted = sorted.filter((s) => taken.has(s.lsid));
    if (accepted.length === 0) return [];
    await this.insertMigratedHistory(manager, collectionUuid, accepted);
    return accepted.map((s) => s.lsid);
  }

  /** For sessions now at the migrated txnNumber: drops their older history, adds the migrated statements and image. */
  private async insertMigratedHistory(manager: EntityManager, collectionUuid: string, sessions: readonly MigratedSession[]): Promise<void> {
    const statements = sessions.flatMap((s) => s.statements.map((t) => ({ ...t, lsid: s.lsid, txnNumber: s.txnNumber })));
    const images = sessions.flatMap((s) => (s.image === undefined ? [] : [{ ...s.image, lsid: s.lsid, txnNumber: s.txnNumber }]));
    await manager.query(
      `WITH current AS (SELECT * FROM unnest($1::uuid[], $2::bigint[]) AS c(lsid, txn_number)),
            statements AS (DELETE FROM txn_statements t USING current c WHERE t.lsid = c.lsid AND t.txn_number <> c.txn_number),
            images AS (DELETE FROM txn_images t USING current c WHERE t.lsid = c.lsid AND t.txn_number <> c.txn_number)
       SELECT 1`,
      [sessions.map((s) => s.lsid), sessions.map((s) => s.txnNumber)],
    );
    await manager.query(
      `INSERT INTO txn_statements (lsid, txn_number, stmt_id, collection_uuid, shard_key, result)
       SELECT u.lsid, u.txn_number, u.stmt_id, $1, decode(u.shard_key, 'hex'), u.result::json
       FROM unnest($2::uuid[], $3::bigint[], $4::int[], $5::text[], $6::text[]) AS u(lsid, txn_number, stmt_id, shard_key, result)
       ON CONFLICT DO NOTHING`,
      [
        collectionUuid,
        statements.map((t) => t.lsid),
        statements.map((t) => t.txnNumber),
        statements.map((t) => t.stmtId),
        statements.map((t) => t.shardKey),
        statements.map((t) => t.result),
      ],
    );
    if (images.length === 0) return;
    await manager.query(
      `INSERT INTO txn_images (lsid, txn_number, image_kind, image)
       SELECT u.lsid, u.txn_number, u.kind, u.image::json FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[]) AS u(lsid, txn_number, kind, image)
       ON CONFLICT (lsid) DO UPDATE SET txn_number = EXCLUDED.txn_number, image_kind = EXCLUDED.image_kind, image = EXCLUDED.image`,
      [images.map((i) => i.lsid), images.map((i) => i.txnNumber), images.map((i) => i.kind), images.map((i) => i.document)],
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
