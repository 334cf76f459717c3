import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type Queryable, queryRows } from '@tessera/platform';
import type { SessionUse } from './used-sessions.js';

/** One node's view of a session, as its last refresh reported it. */
export interface SessionNodeView {
  node: string;
  role: string;
  refreshedAt: string;
  openCursors: number;
  txnNumber: number | null;
}

/** A session of the sessions table with what the nodes that cache it report. */
export interface SessionView {
  lsid: string;
  lastUse: string;
  startedAt: string;
  /** Over every node that caches the session. */
  openCursors: number;
  highestTxnNumber: number | null;
  nodes: SessionNodeView[];
}

export interface SessionPage {
  sessions: SessionView[];
  hasNextPage: boolean;
  totalCount: number;
}

interface SessionViewRow {
  lsid: string;
  last_use: Date;
  started_at: Date;
  open_cursors: number;
  highest_txn_number: string | null;
  nodes: Array<{ node: string; role: string; refreshed_at: string; open_cursors: number; txn_number: number | null }>;
}

/**
 * The sessions table (MongoDB's config.system.sessions) and `session_nodes`, which nodes cache
 * each session. Methods that take `db` run in the caller's transaction; the others on the pool.
 * Id lists travel as one array parameter and are joined through `unnest`, so a statement costs
 * the same whatever the number of sessions.
 */
@Injectable()
export class SessionsStore {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * Inserts the sessions not in the table and moves the others' last use forward, never back
   * (a node's report may be older than another's); answers the ids it inserted (`xmax = 0`
   * marks a row this statement inserted rather than updated).
   */
  async upsertSessions(db: Queryable, uses: readonly SessionUse[]): Promise<string[]> {
    if (uses.length === 0) return [];
    const rows = await queryRows<{ lsid: string; inserted: boolean }>(
      db,
      `INSERT INTO sessions (lsid, last_use)
       SELECT u.id, u.last_use FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, last_use) ORDER BY u.id
       ON CONFLICT (lsid) DO UPDATE SET last_use = GREATEST(sessions.last_use, EXCLUDED.last_use)
       RETURNING lsid, (xmax = 0) AS inserted`,
      [uses.map((u) => u.id), uses.map((u) => u.lastUse.toISOString())],
    );
    return rows.filter((r) => r.inserted).map((r) => r.lsid);
  }

  /** Records what `node` reports of each session it used; its txnNumber never goes back. */
  async upsertSessionNodes(db: Queryable, node: string, role: string, uses: readonly SessionUse[]): Promise<void> {
    if (uses.length === 0) return;
    await db.query(
      `INSERT INTO session_nodes (lsid, node, role, open_cursors, txn_number, refreshed_at)
       SELECT u.id, $1, $2, u.open_cursors, u.txn_number, now()
         FROM unnest($3::uuid[], $4::int[], $5::bigint[]) AS u(id, open_cursors, txn_number) ORDER BY u.id
       ON CONFLICT (lsid, node) DO UPDATE SET role = EXCLUDED.role, open_cursors = EXCLUDED.open_cursors,
         txn_number = GREATEST(session_nodes.txn_number, EXCLUDED.txn_number), refreshed_at = EXCLUDED.refreshed_at`,
      [node, role, uses.map((u) => u.id), uses.map((u) => u.openCursors), uses.map((u) => u.txnNumber)],
    );
  }

  /** Deletes `node`'s rows of the sessions not in `cached`: `session_nodes` mirrors each node's cache. */
  async forgetUncached(db: Queryable, node: string, cached: readonly string[]): Promise<void> {
    await db.query(
      `DELETE FROM session_nodes n WHERE n.node = $1
          AND NOT EXISTS (SELECT 1 FROM unnest($2::uuid[]) AS c(id) WHERE c.id = n.lsid)`,
      [node, cached],
    );
  }

  /** Deletes the sessions `ids` (and their `session_nodes` rows); answers the ids that were there. */
  async remove(db: Queryable, ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await queryRows<{ lsid: string }>(
      db,
      'DELETE FROM sessions s USING unnest($1::uuid[]) AS e(id) WHERE s.lsid = e.id RETURNING s.lsid',
      [[...ids].sort()],
    );
    return rows.map((r) => r.lsid);
  }

  /** Of `ids`, those the table holds (`present`) or does not (`absent`). */
  async partition(db: Queryable, ids: readonly string[]): Promise<{ present: string[]; absent: string[] }> {
    if (ids.length === 0) return { present: [], absent: [] };
    const rows = await queryRows<{ id: string; present: boolean }>(
      db,
      `SELECT c.id, EXISTS (SELECT 1 FROM sessions s WHERE s.lsid = c.id) AS present
         FROM (SELECT DISTINCT id FROM unnest($1::uuid[]) AS u(id)) AS c`,
      [ids],
    );
    return { present: rows.filter((r) => r.present).map((r) => r.id), absent: rows.filter((r) => !r.present).map((r) => r.id) };
  }

  /**
   * Deletes at most `limit` sessions unused for `timeoutMs` by the database's clock, oldest
   * first, skipping rows a refresh holds (it is moving their last use forward); answers their ids.
   */
  async expire(db: Queryable, timeoutMs: number, limit: number): Promise<string[]> {
    const rows = await queryRows<{ lsid: string }>(
      db,
      `DELETE FROM sessions WHERE lsid IN (
         SELECT lsid FROM sessions WHERE last_use < now() - $1 * interval '1 millisecond'
          ORDER BY last_use LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING lsid`,
      [timeoutMs, limit],
    );
    return rows.map((r) => r.lsid);
  }

  /** Rows in the sessions table: the active sessions. */
  async count(): Promise<number> {
    const rows = await queryRows<{ n: number }>(this.dataSource, 'SELECT count(*)::int AS n FROM sessions');
    return rows[0]?.n ?? 0;
  }

  /**
   * A page of sessions in lsid order after `after`, optionally only `lsid` or only those `node`
   * caches, each with its nodes' reports: one statement for the page, one for the count.
   */
  async page(options: { first: number; after?: string; lsid?: string; node?: string }): Promise<SessionPage> {
    const where: string[] = [];
    const parameters: unknown[] = [];
    const add = (sql: string, value: unknown) => {
      parameters.push(value);
      where.push(sql.replaceAll('?', `$${parameters.length}`));
    };
    if (options.lsid !== undefined) add('s.lsid = ?::uuid', options.lsid);
    if (options.node !== undefined) add('EXISTS (SELECT 1 FROM session_nodes f WHERE f.lsid = s.lsid AND f.node = ?)', options.node);
    const whereSql = () => (where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`);
    const counted = await queryRows<{ n: number }>(this.dataSource, `SELECT count(*)::int AS n FROM sessions s ${whereSql()}`, parameters);
    if (options.after !== undefined) add('s.lsid > ?::uuid', options.after);
    parameters.push(options.first + 1);
    const rows = await queryRows<SessionViewRow>(
      this.dataSource,
      `SELECT s.lsid, s.last_use, s.started_at,
              coalesce(sum(n.open_cursors), 0)::int AS open_cursors, max(n.txn_number) AS highest_txn_number,
              coalesce(json_agg(json_build_object('node', n.node, 'role', n.role, 'refreshed_at', n.refreshed_at,
                'open_cursors', n.open_cursors, 'txn_number', n.txn_number) ORDER BY n.node) FILTER (WHERE n.node IS NOT NULL), '[]') AS nodes
         FROM sessions s LEFT JOIN session_nodes n ON n.lsid = s.lsid
         ${whereSql()}
        GROUP BY s.lsid ORDER BY s.lsid LIMIT $${parameters.length}`,
      parameters,
    );
    return {
      sessions: rows.slice(0, options.first).map(sessionViewOf),
      hasNextPage: rows.length > options.first,
      totalCount: counted[0]?.n ?? 0,
    };
  }
}

function sessionViewOf(row: SessionViewRow): SessionView {
  return {
    lsid: row.lsid,
    lastUse: row.last_use.toISOString(),
    startedAt: row.started_at.toISOString(),
    openCursors: row.open_cursors,
    highestTxnNumber: row.highest_txn_number === null ? null : Number(row.highest_txn_number),
    nodes: row.nodes.map((n) => ({
      node: n.node,
      role: n.role,
      refreshedAt: new Date(n.refreshed_at).toISOString(),
      openCursors: n.open_cursors,
      txnNumber: n.txn_number,
    })),
  };
}
