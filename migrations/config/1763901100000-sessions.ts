import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The sessions collection (MongoDB's config.system.sessions): one row per live logical session,
 * upserted by the routers' and shards' logical session cache refreshes, deleted when a node ends
 * the session or when its `last_use` is older than `localLogicalSessionTimeoutMinutes` (the
 * leader's expiry job stands in for the TTL index on `lastUse`, hence the index on `last_use`).
 *
 * `session_nodes` says which nodes cache a session, with what each last reported about it (open
 * cursors, highest txnNumber), for the control plane; it goes with its session.
 */
export class Sessions1763901100000 implements MigrationInterface {
  name = 'Sessions1763901100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE sessions (
        lsid uuid PRIMARY KEY,
        last_use timestamptz NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query('CREATE INDEX sessions_last_use ON sessions (last_use)');
    await q.query(`
      CREATE TABLE session_nodes (
        lsid uuid NOT NULL REFERENCES sessions ON DELETE CASCADE,
        node text NOT NULL,
        role text NOT NULL,
        open_cursors int NOT NULL DEFAULT 0,
        txn_number bigint,
        refreshed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (lsid, node)
      )`);
    // A refresh prunes the rows of its node that it no longer caches.
    await q.query('CREATE INDEX session_nodes_node ON session_nodes (node)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE session_nodes');
    await q.query('DROP TABLE sessions');
  }
}
