import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Access control: `users` (a scrypt hash of the password, if the user has one, and the built-in
 * roles granted, `[{role, db}]`), `api_keys` (the SHA-256 of each key, never the key, and whose
 * it is), `audit_log` (who did what, when, from where, and how it ended), and `auth_generation`,
 * one counter moved by every change of users, roles or keys, which tells the nodes that cache
 * them to read them again.
 */
export class AccessControl1764500000000 implements MigrationInterface {
  name = 'AccessControl1764500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE users (
      name text PRIMARY KEY,
      password_hash text,
      roles jsonb NOT NULL DEFAULT '[]',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE TABLE api_keys (
      id text PRIMARY KEY,
      user_name text NOT NULL REFERENCES users (name) ON DELETE CASCADE,
      digest bytea NOT NULL UNIQUE,
      description text NOT NULL DEFAULT '',
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE TABLE audit_log (
      seq bigserial PRIMARY KEY,
      at timestamptz NOT NULL DEFAULT now(),
      user_name text,
      remote_address text,
      node text NOT NULL,
      action text NOT NULL,
      target text,
      outcome text NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
      details jsonb NOT NULL DEFAULT '{}'
    )`);
    await q.query('CREATE INDEX audit_log_at ON audit_log (at)');
    await q.query(`CREATE TABLE auth_generation (
      one boolean PRIMARY KEY DEFAULT true CHECK (one),
      generation bigint NOT NULL
    )`);
    await q.query('INSERT INTO auth_generation (generation) VALUES (1)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE auth_generation');
    await q.query('DROP TABLE audit_log');
    await q.query('DROP TABLE api_keys');
    await q.query('DROP TABLE users');
  }
}
