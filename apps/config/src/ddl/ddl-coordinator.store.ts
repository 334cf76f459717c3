import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { queryRows } from '@tessera/platform';

/** A coordinator's state document, as `ddl_coordinators` holds it. */
export interface CoordinatorRow {
  id: string;
  kind: string;
  resource: string;
  phase: string;
  request: unknown;
  state: unknown;
  error: { code: string; message: string } | null;
  leader_term: string;
  created_at: Date;
  updated_at: Date;
}

/** The phase of a coordinator that finished. */
export const DONE = 'done';
/** The phase of a coordinator that failed (its error recorded beside it). */
export const FAILED = 'failed';

/**
 * The DDL coordinators' state documents (`ddl_coordinators`, MongoDB's
 * config.system.sharding_ddl_coordinators): what runs, at which phase, with which state, and
 * which leader term owns it. Every write of a running coordinator names its term, so a deposed
 * leader's writes match no row.
 */
@Injectable()
export class DdlCoordinatorStore {
  constructor(private readonly dataSource: DataSource) {}

  /** The coordinators that have neither finished nor failed, oldest first. */
  unfinished(): Promise<CoordinatorRow[]> {
    return this.dataSource.query(`SELECT * FROM ddl_coordinators WHERE phase NOT IN ('${DONE}', '${FAILED}') ORDER BY created_at`);
  }

  /** The unfinished coordinators, oldest first, then the `recent` last ended, newest first. */
  listed(recent: number): Promise<CoordinatorRow[]> {
    return this.dataSource.query(
      `(SELECT * FROM ddl_coordinators WHERE phase NOT IN ('${DONE}', '${FAILED}') ORDER BY created_at)
       UNION ALL
       (SELECT * FROM ddl_coordinators WHERE phase IN ('${DONE}', '${FAILED}') ORDER BY updated_at DESC LIMIT $1)`,
      [recent],
    );
  }

  /** The unfinished coordinator of `resource`, if any. */
  async runningOn(resource: string): Promise<CoordinatorRow | undefined> {
    const rows: CoordinatorRow[] = await this.dataSource.query(
      `SELECT * FROM ddl_coordinators WHERE resource = $1 AND phase NOT IN ('${DONE}', '${FAILED}')`,
      [resource],
    );
    return rows[0];
  }

  /** True when coordinator `id` has finished or failed, or never existed. */
  async ended(id: string): Promise<boolean> {
    const rows: Array<{ phase: string }> = await this.dataSource.query('SELECT phase FROM ddl_coordinators WHERE id::text = $1', [id]);
    return rows[0] === undefined || rows[0].phase === DONE || rows[0].phase === FAILED;
  }

  /** A new coordinator at its first phase; false when a concurrent one took the resource first. */
  async insert(row: {
    id: string;
    kind: string;
    resource: string;
    phase: string;
    request: unknown;
    state: unknown;
    term: number;
  }): Promise<boolean> {
    const inserted: unknown[] = await this.dataSource.query(
      `INSERT INTO ddl_coordinators (id, kind, resource, phase, request, state, leader_term) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT DO NOTHING RETURNING id`,
      [row.id, row.kind, row.resource, row.phase, JSON.stringify(row.request), JSON.stringify(row.state), row.term],
    );
    return inserted.length === 1;
  }

  /** The coordinator, now owned by `term`; undefined when a newer term owns it. */
  async claim(id: string, term: number): Promise<CoordinatorRow | undefined> {
    const claimed: CoordinatorRow[] = await queryRows(
      this.dataSource,
      'UPDATE ddl_coordinators SET leader_term = $2, updated_at = now() WHERE id = $1 AND leader_term <= $2 RETURNING *',
      [id, term],
    );
    return claimed[0];
  }

  /** Records the phase about to run and the state it starts from; false when `term` no longer owns the coordinator. */
  async checkpoint(id: string, term: number, phase: string, state: unknown): Promise<boolean> {
    const rows: unknown[] = await queryRows(
      this.dataSource,
      'UPDATE ddl_coordinators SET phase = $3, state = $4, updated_at = now() WHERE id = $1 AND leader_term = $2 RETURNING id',
      [id, term, phase, JSON.stringify(state)],
    );
    return rows.length > 0;
  }

  /** Marks the coordinator failed with `error`, if `term` still owns it. */
  async fail(id: string, term: number, error: unknown): Promise<void> {
    await this.dataSource.query(
      'UPDATE ddl_coordinators SET phase = $2, error = $3, updated_at = now() WHERE id = $1 AND leader_term = $4',
      [id, FAILED, JSON.stringify(error), term],
    );
  }

  /**
   * Whether, inside `manager`'s transaction, the coordinator still belongs to `term` and `holder`
   * still holds the live lease of that term; the coordinator's row stays locked until the
   * transaction ends, so the check and the transaction's writes commit together.
   */
  async isOwned(manager: EntityManager, id: string, term: number, holder: string): Promise<boolean> {
    const rows: unknown[] = await manager.query(
      `SELECT 1 FROM ddl_coordinators c, leader_lease l
        WHERE c.id = $1 AND c.leader_term = $2 AND l.term = $2 AND l.holder = $3 AND l.expires_at > now()
        FOR UPDATE OF c`,
      [id, term, holder],
    );
    return rows.length > 0;
  }
}
