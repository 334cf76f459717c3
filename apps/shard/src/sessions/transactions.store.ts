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

/** A session's row as last read or written: its txnNumber and how many statements it holds. */
export interface SeenRecord {
  txnNumber: number;
  statements: number;
}

/**
 * One session's part of a command's record: the session moves to `txnNumber` (or stays there)
 * and gains `statements`, provided its row is still as `seen` (none when undefined).
 */
export interface SessionRecordPart {
  lsid: string;
  txnNumber: number;
  seen: SeenRecord | undefined;
  statements: readonly StatementRecord[];
}

/** A session's row as stored: its txnNumber, that txnNumber's executed statements and findAndModify image. */
export interface StoredSession {
  txnNumber: number;
  /** How many statements the row holds, the sentinel included. */
  count: number;
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
  /** An expression that raises SESSION_RECORD_CHANGED, rolling the statement back, unless every part was recorded. */
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

/** What `txn_expect` raises when a session's row was not as a process expected. */
export const SESSION_RECORD_CHANGED = 'SESSION_RECORD_CHANGED';

/**
 * The shard's transactions table and its retry history: `txn_records` (config.transactions),
 * one row per session holding its current txnNumber's executed statements (stmtIds, the written
 * documents' shard keys, results), and `txn_images` (config.image_collection). Every method runs
 * in the caller's transaction or statement, so that a write and its record commit together.
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
      count: row.stmt_ids.length,
      statements: new Map(executed.map(([stmtId, i]) => [stmtId, resultOf(row.results[i] ?? null)])),
      incompleteHistory: executed.length < row.stmt_ids.length,
      image: row.image_kind === null || row.image === null ? undefined : { kind: row.image_kind, document: JSON.parse(row.image) },
    };
  }

  /**
   * The SQL recording `parts` of a command on the collection `collectionUuid`, its parameters
   * numbered from `$first`, to run in the statement or transaction of the write. A part whose
   * session was seen with a row updates that row only if it still holds the seen txnNumber and
   * statement count, appending to the statements of an unchanged txnNumber and replacing those
   * of an older one; a part seen without a row inserts one only if there still is none. So a
   * process that acted on a stale view of a session (a migration's history applied meanwhile)
   * records nothing and the check rolls the write back. New rows are inserted in lsid order;
   * updated ones are locked in the join's order, so a command of several sessions can deadlock
   * with a migration applying history of the same sessions (which locks in lsid order), and
   * Postgres then fails one of them: the write's error makes the catalog reload its sessions.
   */
  recording(first: number, collectionUuid: string, parts: readonly SessionRecordPart[]): RecordingSql {
    const [json, collection, count, lsids] = [`$${first}::json`, `$${first + 1}::uuid`, `$${first + 2}::int`, `$${first + 3}::uuid[]`];
    const append = (column: string) => `CASE WHEN r.txn_number = p.txn_number THEN r.${column} || p.${column} ELSE p.${column} END`;
    return {
      shape: 'r1',
      ctes: `parts AS (
               SELECT * FROM json_to_recordset(${json})
                 AS p(lsid uuid, txn_number bigint, seen_txn bigint, seen_count int, stmt_ids int[], shard_keys bytea[], results text[])),
             advanced AS (
               UPDATE txn_records r SET txn_number = p.txn_number, last_write_at = now(), collection_uuid = ${collection},
                 stmt_ids = ${append('stmt_ids')}, shard_keys = ${append('shard_keys')}, results = ${append('results')}
               FROM parts p
               WHERE r.lsid = ANY(${lsids}) AND p.seen_txn IS NOT NULL AND r.lsid = p.lsid AND r.txn_number = p.seen_txn AND cardinality(r.stmt_ids) = p.seen_count
               RETURNING 1),
             created AS (
               INSERT INTO txn_records (lsid, txn_number, last_write_at, collection_uuid, stmt_ids, shard_keys, results)
               SELECT lsid, txn_number, now(), ${collection}, stmt_ids, shard_keys, results FROM parts WHERE seen_txn IS NULL ORDER BY lsid
               ON CONFLICT (lsid) DO NOTHING
               RETURNING 1)`,
      check: `txn_expect((SELECT count(*) FROM advanced) + (SELECT count(*) FROM created) = ${count}, '${SESSION_RECORD_CHANGED}')`,
      values: [
        JSON.stringify([...parts].sort((a, b) => (a.lsid < b.lsid ? -1 : 1)).map(partRow)),
        collectionUuid,
        parts.length,
        parts.map((p) => p.lsid),
      ],
    };
  }

  /** Records `parts` in the caller's transaction; raises SESSION_RECORD_CHANGED as `recording` says. */
  async recordStatements(manager: EntityManager, collectionUuid: string, parts: readonly SessionRecordPart[]): Promise<void> {
    const { ctes, check, values } = this.recording(1, collectionUuid, parts);
    await manager.query(`WITH ${ctes} SELECT ${check}`, values);
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
    // Rows are locked in lsid order (see `recording` for the writes' order).
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
    await manager.query(
      `INSERT INTO txn_records AS r (lsid, txn_number, last_write_at, collection_uuid, stmt_ids, shard_keys, results)
       SELECT lsid, txn_number, last_write_at, $2, stmt_ids, shard_keys, results
       FROM json_to_recordset($1::json) AS p(lsid uuid, txn_number bigint, last_write_at timestamptz, stmt_ids int[], shard_keys bytea[], results text[])
       ORDER BY lsid
       ON CONFLICT (lsid) DO UPDATE SET
         stmt_ids = CASE WHEN r.txn_number = EXCLUDED.txn_number THEN r.stmt_ids || EXCLUDED.stmt_ids ELSE EXCLUDED.stmt_ids END,
         shard_keys = CASE WHEN r.txn_number = EXCLUDED.txn_number THEN r.shard_keys || EXCLUDED.shard_keys ELSE EXCLUDED.shard_keys END,
         results = CASE WHEN r.txn_number = EXCLUDED.txn_number THEN r.results || EXCLUDED.results ELSE EXCLUDED.results END,
         txn_number = EXCLUDED.txn_number, collection_uuid = EXCLUDED.collection_uuid,
         last_write_at = GREATEST(r.last_write_at, EXCLUDED.last_write_at)`,
      [
        JSON.stringify(
          taken.map((s) => ({
            lsid: s.lsid,
            txn_number: s.txnNumber,
            last_write_at: s.lastWriteAt,
            stmt_ids: s.statements.map((t) => t.stmtId),
            shard_keys: s.statements.map((t) => (t.stmtId === INCOMPLETE_HISTORY_STMT_ID ? null : `\\x${t.shardKey}`)),
            results: s.statements.map((t) => t.result),
          })),
        ),
        collectionUuid,
      ],
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

/** A part as `recording`'s `json_to_recordset` reads it (shard keys in bytea's hex input form). */
function partRow(part: SessionRecordPart) {
  return {
    lsid: part.lsid,
    txn_number: part.txnNumber,
    seen_txn: part.seen?.txnNumber ?? null,
    seen_count: part.seen?.statements ?? 0,
    stmt_ids: part.statements.map((s) => s.stmtId),
    shard_keys: part.statements.map((s) => (s.shardKey === undefined ? null : `\\x${Buffer.from(s.shardKey).toString('hex')}`)),
    results: part.statements.map((s) => (s.result.op === 'insert' ? null : JSON.stringify(s.result))),
  };
}
