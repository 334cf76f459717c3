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

/** One session's part of a command's record: the session is at `txnNumber` and executed `statements`. */
export interface SessionRecordPart {
  lsid: string;
  txnNumber: number;
  statements: readonly StatementRecord[];
}

/** A session's row as stored: its txnNumber, that txnNumber's executed statements and findAndModify image. */
export interface StoredSession {
  txnNumber: number;
  statements: Map<number, StatementResult>;
  /** The row holds INCOMPLETE_HISTORY_STMT_ID: some statements of the txnNumber may be missing. */
  incompleteHistory: boolean;
  image: { kind: ImageKind; document: unknown } | undefined;
}

/** The SQL that records parts (see `recording`), and its parameters. */
export interface RecordingSql {
  /** Names the SQL's text, which is the same for every record: a named statement may include it. */
  shape: string;
  /** CTEs, to follow a `WITH` and its own CTEs. */
  ctes: string;
  /** An expression true once the record is made, to AND into the statement's answer. */
  check: string;
  values: unknown[];
}

/** An inserted document's result, which `results` holds as NULL: most statements are inserts. */
const INSERTED_TEXT = JSON.stringify({ op: 'insert' } satisfies StatementResult);

/** A stored result (NULL for an inserted document). */
function resultOf(text: string | null): StatementResult {
  return text === null ? { op: 'insert' } : (JSON.parse(text) as StatementResult);
}

/**
 * The stmtId of the sentinel a session's statements hold when migrated history may have missed
 * some (MongoDB's kIncompleteHistoryStmtId): a retry of a statement not recorded then gets
 * IncompleteTransactionHistory rather than running again.
 */
export const INCOMPLETE_HISTORY_STMT_ID = -1;

/** The sentinel as a migrated statement: no shard key, so it belongs to every range. */
const INCOMPLETE_HISTORY_STATEMENT = { stmtId: INCOMPLETE_HISTORY_STMT_ID, shardKey: '', result: 'null' };

/**
 * The shard's transactions table and its retry history: `txn_records` (config.transactions),
 * one row per session holding its current txnNumber's executed statements (stmtIds, the written
 * documents' shard keys, results), `txn_record_log`, where writes record them until they are
 * folded into `txn_records`, and `txn_images` (config.image_collection). Every method runs in
 * the caller's transaction or statement, so that a write and its record commit together. The
 * methods that read `txn_records` see only what was folded (see SessionRecords).
 */
@Injectable()
export class TransactionsStore {
  /** The session's row with its image, or undefined when it has none. */
  async loadSession(manager: EntityManager, lsid: string): Promise<StoredSession | undefined> {
    const rows: Array<{
      txn_number: string;
      stmt_ids: number[];
      results: Array<string | null>;
      image_kind: ImageKind | null;
      image: string | null;
    }> = await manager.query(
      `SELECT r.txn_number, r.stmt_ids, r.results, i.image_kind, i.image::text AS image
         FROM txn_records r LEFT JOIN txn_images i ON i.lsid = r.lsid AND i.txn_number = r.txn_number
         WHERE r.lsid = $1`,
      [lsid],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    const executed = row.stmt_ids.flatMap((stmtId, i) => (stmtId === INCOMPLETE_HISTORY_STMT_ID ? [] : [[stmtId, i] as const]));
    return {
      txnNumber: Number(row.txn_number),
      statements: new Map(executed.map(([stmtId, i]) => [stmtId, resultOf(row.results[i] ?? null)])),
      incompleteHistory: executed.length < row.stmt_ids.length,
      image: row.image_kind === null || row.image === null ? undefined : { kind: row.image_kind, document: JSON.parse(row.image) },
    };
  }

  /**
   * The SQL recording `parts` of a command on the collection `collectionUuid`, its parameters
   * numbered from `$first`, to run in the statement or transaction of the write: one row of
   * `txn_record_log`, whatever the number of parts. No session's row is read or locked: the
   * process's session catalog knows each session's state, and whatever else changes
   * `txn_records` first folds the log in with the sessions concerned checked out.
   */
  recording(first: number, collectionUuid: string, parts: readonly SessionRecordPart[]): RecordingSql {
    return {
      shape: 'l1',
      ctes: `logged AS (INSERT INTO txn_record_log (collection_uuid, parts) VALUES ($${first}::uuid, $${first + 1}) RETURNING 1)`,
      check: 'EXISTS (SELECT FROM logged)',
      values: [collectionUuid, JSON.stringify(parts.map(logPart))],
    };
  }

  /** Records `parts` in the caller's transaction (see `recording`). */
  async recordStatements(manager: EntityManager, collectionUuid: string, parts: readonly SessionRecordPart[]): Promise<void> {
    await manager.query('INSERT INTO txn_record_log (collection_uuid, parts) VALUES ($1, $2)', [
      collectionUuid,
      JSON.stringify(parts.map(logPart)),
    ]);
  }

  /**
   * Moves the log's rows into `txn_records`, in the caller's transaction; answers how many
   * sessions it updated. Per session the highest txnNumber wins and the statements of equal
   * txnNumbers join, so neither the log's order nor a row's txnNumber older than the log's
   * matters. Rows logged while this runs stay for the next fold.
   */
  async foldLog(manager: EntityManager): Promise<number> {
    const rows: Array<{ collection_uuid: string; parts: string; written_at: Date }> = await manager.query(
      // A SELECT around the DELETE: TypeORM answers a bare DELETE with [rows, count].
      'WITH taken AS (DELETE FROM txn_record_log RETURNING collection_uuid, parts, written_at) SELECT * FROM taken',
    );
    if (rows.length === 0) return 0;
    const sessions = new Map<string, FoldedSession>();
    for (const row of rows) {
      for (const part of JSON.parse(row.parts) as LoggedPart[]) {
        const known = sessions.get(part.l);
        const statements = { stmtIds: part.s, shardKeys: part.k.map((k) => (k === null ? null : `\\x${k}`)), results: part.r };
        if (known === undefined || known.txnNumber < part.t) {
          sessions.set(part.l, {
            lsid: part.l,
            txnNumber: part.t,
            collectionUuid: row.collection_uuid,
            lastWriteAt: row.written_at,
            ...statements,
          });
        } else if (known.txnNumber === part.t) {
          known.stmtIds.push(...statements.stmtIds);
          known.shardKeys.push(...statements.shardKeys);
          known.results.push(...statements.results);
          if (known.lastWriteAt < row.written_at) known.lastWriteAt = row.written_at;
        }
      }
    }
    await this.upsertRecords(manager, [...sessions.values()]);
    return sessions.size;
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
   * txnNumber. Statements of an older txnNumber are not kept, so cannot move. A statement
   * without a shard key (an update or delete that matched nothing, or the sentinel of history
   * migrated in incomplete) may concern any range: its session goes with `incompleteHistory`.
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
      incomplete: boolean;
      image_kind: 'preImage' | 'postImage' | null;
      image: string | null;
    }> = await manager.query(
      `WITH moving AS (
         SELECT r.lsid, r.txn_number, r.last_write_at, bool_or(u.shard_key IS NULL) AS incomplete,
                coalesce(json_agg(json_build_object('stmtId', u.stmt_id, 'shardKey', encode(u.shard_key, 'hex'), 'result', coalesce(u.result, $6))
                                  ORDER BY u.stmt_id) FILTER (WHERE u.shard_key IS NOT NULL), '[]') AS statements
         FROM txn_records r, unnest(r.stmt_ids, r.shard_keys, r.results) AS u(stmt_id, shard_key, result)
         WHERE r.collection_uuid = $1 AND ((u.shard_key >= $2 AND u.shard_key < $3) OR u.shard_key IS NULL)
           AND ($4::uuid IS NULL OR r.lsid > $4::uuid)
         GROUP BY r.lsid ORDER BY r.lsid LIMIT $5)
       SELECT m.*, i.image_kind, i.image::text AS image
       FROM moving m LEFT JOIN txn_images i ON i.lsid = m.lsid AND i.txn_number = m.txn_number
       ORDER BY m.lsid`,
      [range.collectionUuid, range.min, range.max, afterLsid ?? null, limit, INSERTED_TEXT],
    );
    return rows.map((r) => ({
      lsid: r.lsid,
      txnNumber: Number(r.txn_number),
      lastWriteAt: r.last_write_at.toISOString(),
      statements: r.statements,
      ...(r.image_kind !== null && r.image !== null ? { image: { kind: r.image_kind, document: r.image } } : {}),
      ...(r.incomplete ? { incompleteHistory: true as const } : {}),
    }));
  }

  /**
   * Applies migrated history of the collection `collectionUuid`, in the caller's transaction.
   * Per session: a session here at a HIGHER txnNumber keeps its own history and ignores the
   * migrated one (a retry of the older txnNumber is refused anyway); at an equal txnNumber the
   * migrated statements it lacks join its own; at a lower one (or none) it moves to the migrated
   * txnNumber and its statements. Applying the same history again changes nothing. Answers the
   * lsids whose history was taken; the caller's process must forget what it knew of them.
   */
  async applyMigratedSessions(manager: EntityManager, collectionUuid: string, sessions: readonly MigratedSession[]): Promise<string[]> {
    if (sessions.length === 0) return [];
    // What a retry answers must parse: a malformed page applies nothing.
    for (const session of sessions) for (const statement of session.statements) JSON.parse(statement.result);
    // Rows are locked in lsid order (as `upsertRecords` writes them).
    const current: Array<{ lsid: string; txn_number: string; stmt_ids: number[] }> = await manager.query(
      'SELECT lsid, txn_number, stmt_ids FROM txn_records WHERE lsid = ANY($1::uuid[]) ORDER BY lsid FOR UPDATE',
      [sessions.map((s) => s.lsid)],
    );
    const here = new Map(current.map((r) => [r.lsid, { txnNumber: Number(r.txn_number), stmtIds: new Set(r.stmt_ids) }]));
    const taken = sessions.flatMap((s) => {
      const mine = here.get(s.lsid);
      if (mine !== undefined && mine.txnNumber > s.txnNumber) return [];
      const all = s.incompleteHistory ? [...s.statements, INCOMPLETE_HISTORY_STATEMENT] : s.statements;
      const statements = mine?.txnNumber === s.txnNumber ? all.filter((t) => !mine.stmtIds.has(t.stmtId)) : all;
      return [{ ...s, statements }];
    });
    if (taken.length === 0) return [];
    await this.upsertRecords(
      manager,
      taken.map((s) => ({
        lsid: s.lsid,
        txnNumber: s.txnNumber,
        collectionUuid,
        lastWriteAt: s.lastWriteAt,
        stmtIds: s.statements.map((t) => t.stmtId),
        shardKeys: s.statements.map((t) => (t.stmtId === INCOMPLETE_HISTORY_STMT_ID ? null : `\\x${t.shardKey}`)),
        results: s.statements.map((t) => t.result),
      })),
    );
    const images = taken.flatMap((s) => (s.image === undefined ? [] : [{ ...s.image, lsid: s.lsid, txnNumber: s.txnNumber }]));
    if (images.length > 0) {
      await manager.query(
        `INSERT INTO txn_images (lsid, txn_number, image_kind, image)
         SELECT u.lsid, u.txn_number, u.kind, u.image::json FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[]) AS u(lsid, txn_number, kind, image)
         ON CONFLICT (lsid) DO UPDATE SET txn_number = EXCLUDED.txn_number, image_kind = EXCLUDED.image_kind, image = EXCLUDED.image`,
        [images.map((i) => i.lsid), images.map((i) => i.txnNumber), images.map((i) => i.kind), images.map((i) => i.document)],
      );
    }
    return taken.map((s) => s.lsid);
  }

  /**
   * Brings each session's row to `sessions`: a row at the same txnNumber gains the statements,
   * one at an older txnNumber (or none) takes them instead, one at a newer txnNumber stays.
   * Rows are written in lsid order, so that two of these never wait on each other.
   */
  private async upsertRecords(manager: EntityManager, sessions: readonly FoldedSession[]): Promise<void> {
    const rows = sessions.map((s) => ({
      lsid: s.lsid,
      txn_number: s.txnNumber,
      collection_uuid: s.collectionUuid,
      last_write_at: s.lastWriteAt,
      stmt_ids: s.stmtIds,
      shard_keys: s.shardKeys,
      results: s.results,
    }));
    await manager.query(
      `INSERT INTO txn_records AS r (lsid, txn_number, last_write_at, collection_uuid, stmt_ids, shard_keys, results)
       SELECT lsid, txn_number, last_write_at, collection_uuid, stmt_ids, shard_keys, results
       FROM json_to_recordset($1::json)
         AS p(lsid uuid, txn_number bigint, collection_uuid uuid, last_write_at timestamptz, stmt_ids int[], shard_keys bytea[], results text[])
       ORDER BY lsid
       ON CONFLICT (lsid) DO UPDATE SET
         stmt_ids = CASE WHEN r.txn_number = EXCLUDED.txn_number THEN r.stmt_ids || EXCLUDED.stmt_ids ELSE EXCLUDED.stmt_ids END,
         shard_keys = CASE WHEN r.txn_number = EXCLUDED.txn_number THEN r.shard_keys || EXCLUDED.shard_keys ELSE EXCLUDED.shard_keys END,
         results = CASE WHEN r.txn_number = EXCLUDED.txn_number THEN r.results || EXCLUDED.results ELSE EXCLUDED.results END,
         txn_number = EXCLUDED.txn_number, collection_uuid = EXCLUDED.collection_uuid,
         last_write_at = GREATEST(r.last_write_at, EXCLUDED.last_write_at)
       WHERE r.txn_number <= EXCLUDED.txn_number`,
      [JSON.stringify(rows)],
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
   * Forgets the sessions' records and images, unless a write touched a session after
   * `cutoff` (it was used again while the reaper asked the config server); answers those reaped.
   */
  async reapSessions(manager: EntityManager, lsids: readonly string[], cutoff: Date): Promise<string[]> {
    const rows: Array<{ lsid: string }> = await manager.query(
      `WITH reaped AS (DELETE FROM txn_records WHERE lsid = ANY($1::uuid[]) AND last_write_at < $2 RETURNING lsid),
            images AS (DELETE FROM txn_images WHERE lsid IN (SELECT lsid FROM reaped))
       SELECT lsid FROM reaped`,
      [lsids, cutoff],
    );
    return rows.map((r) => r.lsid);
  }
}

/** A session part as `txn_record_log.parts` holds it: lsid, txnNumber, stmtIds, shard keys in hex, results (NULL for an insert). */
interface LoggedPart {
  l: string;
  t: number;
  s: number[];
  k: Array<string | null>;
  r: Array<string | null>;
}

/** A session's row as the fold or a migration writes it (shard keys in bytea's hex input form). */
interface FoldedSession {
  lsid: string;
  txnNumber: number;
  collectionUuid: string;
  lastWriteAt: Date | string;
  stmtIds: number[];
  shardKeys: Array<string | null>;
  results: Array<string | null>;
}

function logPart(part: SessionRecordPart): LoggedPart {
  return {
    l: part.lsid,
    t: part.txnNumber,
    s: part.statements.map((s) => s.stmtId),
    k: part.statements.map((s) => (s.shardKey === undefined ? null : Buffer.from(s.shardKey).toString('hex'))),
    r: part.statements.map((s) => (s.result.op === 'insert' ? null : JSON.stringify(s.result))),
  };
}
