import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { RoleGrant } from '@tessera/core';
import { type Queryable, queryRows } from '@tessera/platform';
import type { AuditEntry } from '@tessera/protocol';

/** A user as stored: never its password, only whether it has one. */
export interface UserRecord {
  name: string;
  roles: RoleGrant[];
  hasPassword: boolean;
  createdAt: string;
  updatedAt: string;
}

/** An API key as stored: never the key, only its digest's owner and description. */
export interface ApiKeyRecord {
  id: string;
  user: string;
  description: string;
  createdAt: string;
}

/** An audit entry as read back, with its position and time. */
export interface AuditRecord extends AuditEntry {
  seq: number;
  at: string;
}

interface UserRow {
  name: string;
  roles: RoleGrant[];
  password_hash: string | null;
  created_at: Date;
  updated_at: Date;
}

const userOf = (row: UserRow): UserRecord => ({
  name: row.name,
  roles: row.roles,
  hasPassword: row.password_hash !== null,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

/**
 * `users`, `api_keys`, `audit_log` and `auth_generation`. Methods that take `db` run in the
 * caller's transaction, so a change and the generation's step commit together.
 */
@Injectable()
export class AccessStore {
  constructor(private readonly dataSource: DataSource) {}

  /** Runs `work` in one transaction. */
  transaction<T>(work: (db: Queryable) => Promise<T>): Promise<T> {
    return this.dataSource.transaction((manager) => work(manager));
  }

  async generation(db: Queryable = this.dataSource): Promise<number> {
    const [row] = await queryRows<{ generation: string }>(db, 'SELECT generation FROM auth_generation');
    return Number(row!.generation);
  }

  /** Moves the generation on: every node's cached identities are stale from its commit. */
  async bumpGeneration(db: Queryable): Promise<number> {
    const [row] = await queryRows<{ generation: string }>(
      db,
      'UPDATE auth_generation SET generation = generation + 1 RETURNING generation',
    );
    return Number(row!.generation);
  }

  async userCount(db: Queryable = this.dataSource): Promise<number> {
    const [row] = await queryRows<{ n: number }>(db, 'SELECT count(*)::int AS n FROM users');
    return row!.n;
  }

  /** Inserts a user; false when the name is taken. */
  async insertUser(db: Queryable, name: string, passwordHash: string | null, roles: readonly RoleGrant[]): Promise<boolean> {
    const rows = await queryRows<{ name: string }>(
      db,
      `INSERT INTO users (name, password_hash, roles) VALUES ($1, $2, $3::jsonb) ON CONFLICT (name) DO NOTHING RETURNING name`,
      [name, passwordHash, JSON.stringify(roles)],
    );
    return rows.length === 1;
  }

  /** Creates the user or sets its roles (the environment's users at start); true when either happened. */
  async upsertUser(db: Queryable, name: string, roles: readonly RoleGrant[]): Promise<boolean> {
    const rows = await queryRows<{ name: string }>(
      db,
      `INSERT INTO users (name, roles) VALUES ($1, $2::jsonb)
       ON CONFLICT (name) DO UPDATE SET roles = EXCLUDED.roles, updated_at = now() WHERE users.roles <> EXCLUDED.roles
       RETURNING name`,
      [name, JSON.stringify(roles)],
    );
    return rows.length === 1;
  }

  async user(name: string, db: Queryable = this.dataSource): Promise<UserRecord | undefined> {
    const [row] = await queryRows<UserRow>(db, 'SELECT * FROM users WHERE name = $1', [name]);
    return row === undefined ? undefined : userOf(row);
  }

  async users(db: Queryable = this.dataSource): Promise<UserRecord[]> {
    return (await queryRows<UserRow>(db, 'SELECT * FROM users ORDER BY name')).map(userOf);
  }

  /** The user's password hash and roles, for a sign-in. */
  async credentialsOf(name: string): Promise<{ passwordHash: string | null; roles: RoleGrant[] } | undefined> {
    const [row] = await queryRows<UserRow>(this.dataSource, 'SELECT password_hash, roles FROM users WHERE name = $1', [name]);
    return row === undefined ? undefined : { passwordHash: row.password_hash, roles: row.roles };
  }

  /** Sets a user's roles and/or password hash; false when there is no such user. */
  async updateUser(db: Queryable, name: string, change: { roles?: readonly RoleGrant[]; passwordHash?: string | null }): Promise<boolean> {
    const rows = await queryRows<{ name: string }>(
      db,
      `UPDATE users SET roles = COALESCE($2::jsonb, roles), password_hash = CASE WHEN $3 THEN $4 ELSE password_hash END, updated_at = now()
       WHERE name = $1 RETURNING name`,
      [
        name,
        change.roles === undefined ? null : JSON.stringify(change.roles),
        change.passwordHash !== undefined,
        change.passwordHash ?? null,
      ],
    );
    return rows.length === 1;
  }

  /** Deletes a user and its keys; false when there was none. */
  async deleteUser(db: Queryable, name: string): Promise<boolean> {
    return (await queryRows<{ name: string }>(db, 'DELETE FROM users WHERE name = $1 RETURNING name', [name])).length === 1;
  }

  async insertApiKey(db: Queryable, key: { id: string; user: string; digest: Buffer; description: string }): Promise<void> {
    await db.query('INSERT INTO api_keys (id, user_name, digest, description) VALUES ($1, $2, $3, $4)', [
      key.id,
      key.user,
      key.digest,
      key.description,
    ]);
  }

  /** Sets the key `id` of `user` to `digest` (the environment's keys at start); true when it changed. */
  async upsertApiKey(db: Queryable, key: { id: string; user: string; digest: Buffer; description: string }): Promise<boolean> {
    const rows = await queryRows<{ id: string }>(
      db,
      `INSERT INTO api_keys (id, user_name, digest, description) VALUES ($1, $2, $3, $4)
       ON CONFLICT (id) DO UPDATE SET user_name = EXCLUDED.user_name, digest = EXCLUDED.digest
         WHERE api_keys.digest <> EXCLUDED.digest OR api_keys.user_name <> EXCLUDED.user_name
       RETURNING id`,
      [key.id, key.user, key.digest, key.description],
    );
    return rows.length === 1;
  }

  async deleteApiKey(db: Queryable, id: string): Promise<boolean> {
    return (await queryRows<{ id: string }>(db, 'DELETE FROM api_keys WHERE id = $1 RETURNING id', [id])).length === 1;
  }

  async apiKeys(user?: string): Promise<ApiKeyRecord[]> {
    const rows = await queryRows<{ id: string; user_name: string; description: string; created_at: Date }>(
      this.dataSource,
      `SELECT id, user_name, description, created_at FROM api_keys WHERE $1::text IS NULL OR user_name = $1 ORDER BY user_name, created_at`,
      [user ?? null],
    );
    return rows.map((r) => ({ id: r.id, user: r.user_name, description: r.description, createdAt: r.created_at.toISOString() }));
  }

  /** The key with this digest, with its user's roles. */
  async keyByDigest(digest: Buffer): Promise<{ id: string; user: string; roles: RoleGrant[] } | undefined> {
    const [row] = await queryRows<{ id: string; user_name: string; roles: RoleGrant[] }>(
      this.dataSource,
      'SELECT k.id, k.user_name, u.roles FROM api_keys k JOIN users u ON u.name = k.user_name WHERE k.digest = $1',
      [digest],
    );
    return row === undefined ? undefined : { id: row.id, user: row.user_name, roles: row.roles };
  }

  async appendAudit(entries: readonly AuditEntry[], db: Queryable = this.dataSource): Promise<AuditRecord[]> {
    if (entries.length === 0) return [];
    const rows = await queryRows<{ seq: string; at: Date }>(
      db,
      `INSERT INTO audit_log (user_name, remote_address, node, action, target, outcome, details)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[])
       RETURNING seq, at`,
      [
        entries.map((e) => e.user),
        entries.map((e) => e.remoteAddress),
        entries.map((e) => e.node),
        entries.map((e) => e.action),
        entries.map((e) => e.target),
        entries.map((e) => e.outcome),
        entries.map((e) => JSON.stringify(e.details)),
      ],
    );
    return rows.map((row, i) => ({ ...entries[i]!, seq: Number(row.seq), at: row.at.toISOString() }));
  }

  /** The newest audit entries, newest first, before `beforeSeq` when given. */
  async audit(filter: { limit: number; beforeSeq?: number; user?: string; action?: string }): Promise<AuditRecord[]> {
    const rows = await queryRows<AuditRow>(
      this.dataSource,
      `SELECT * FROM audit_log
       WHERE ($1::bigint IS NULL OR seq < $1) AND ($2::text IS NULL OR user_name = $2) AND ($3::text IS NULL OR action = $3)
       ORDER BY seq DESC LIMIT $4`,
      [filter.beforeSeq ?? null, filter.user ?? null, filter.action ?? null, filter.limit],
    );
    return rows.map(auditRecordOf);
  }

  /** Audit entries after `seq`, oldest first, at most `limit`. */
  async auditAfter(seq: number, limit: number): Promise<AuditRecord[]> {
    const rows = await queryRows<AuditRow>(this.dataSource, 'SELECT * FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2', [seq, limit]);
    return rows.map(auditRecordOf);
  }

  /** The highest audit seq (0 when the log is empty). */
  async lastAuditSeq(): Promise<number> {
    const [row] = await queryRows<{ seq: string }>(this.dataSource, 'SELECT coalesce(max(seq), 0) AS seq FROM audit_log');
    return Number(row?.seq ?? 0);
  }

  /**
   * Deletes the audit entries older than `before`, `batch` per statement (so that none holds the
   * table for long); answers how many went.
   */
  async pruneAudit(before: Date, batch = 10_000): Promise<number> {
    let deleted = 0;
    for (;;) {
      const [row] = await queryRows<{ n: number }>(
        this.dataSource,
        `WITH doomed AS (SELECT seq FROM audit_log WHERE at < $1 ORDER BY seq LIMIT $2),
              gone AS (DELETE FROM audit_log a USING doomed WHERE a.seq = doomed.seq RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [before, batch],
      );
      deleted += row?.n ?? 0;
      if ((row?.n ?? 0) < batch) return deleted;
    }
  }
}

interface AuditRow {
  seq: string;
  at: Date;
  user_name: string | null;
  remote_address: string | null;
  node: string;
  action: string;
  target: string | null;
  outcome: AuditEntry['outcome'];
  details: Record<string, unknown>;
}

const auditRecordOf = (r: AuditRow): AuditRecord => ({
  seq: Number(r.seq),
  at: r.at.toISOString(),
  user: r.user_name,
  remoteAddress: r.remote_address,
  node: r.node,
  action: r.action,
  target: r.target,
  outcome: r.outcome,
  details: r.details,
});
