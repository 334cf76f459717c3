import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { ClusterTimeKey } from '@tessera/protocol';

/** A key as the leader decides about it: its id and expiry (the secret stays in the table). */
export interface StoredKeyExpiry {
  keyId: string;
  expiresAt: Date;
}

/** The cluster_time_keys table (MongoDB's admin.system.keys). Every method runs in the caller's transaction. */
@Injectable()
export class ClusterTimeKeysStore {
  /** Serializes key generation across config processes, for the caller's transaction. */
  async lock(manager: EntityManager): Promise<void> {
    await manager.query("SELECT pg_advisory_xact_lock(hashtext('cluster_time_keys'))");
  }

  /** The keys that have not expired at `now`, soonest expiry first. */
  async unexpired(manager: EntityManager, now: Date): Promise<StoredKeyExpiry[]> {
    const rows: Array<{ key_id: string; expires_at: Date }> = await manager.query(
      'SELECT key_id::text, expires_at FROM cluster_time_keys WHERE expires_at > $1 ORDER BY expires_at',
      [now],
    );
    return rows.map((r) => ({ keyId: r.key_id, expiresAt: r.expires_at }));
  }

  /** Every key's id and expiry, newest first (keyIds only grow); the secret is not read. */
  async expiries(manager: EntityManager): Promise<StoredKeyExpiry[]> {
    const rows: Array<{ key_id: string; expires_at: Date }> = await manager.query(
      'SELECT key_id::text, expires_at FROM cluster_time_keys ORDER BY key_id DESC',
    );
    return rows.map((r) => ({ keyId: r.key_id, expiresAt: r.expires_at }));
  }

  /** The highest keyId ever given, when any. */
  async highestKeyId(manager: EntityManager): Promise<bigint | undefined> {
    const [row]: Array<{ key_id: string | null }> = await manager.query('SELECT max(key_id)::text AS key_id FROM cluster_time_keys');
    return row?.key_id === null || row === undefined ? undefined : BigInt(row.key_id);
  }

  async insert(manager: EntityManager, keyId: bigint, key: Buffer, expiresAt: Date): Promise<void> {
    await manager.query('INSERT INTO cluster_time_keys (key_id, key, expires_at) VALUES ($1, $2, $3)', [keyId.toString(), key, expiresAt]);
  }

  /** The keys with their secrets that expire after `since`, soonest expiry first. */
  async since(manager: EntityManager, since: Date): Promise<ClusterTimeKey[]> {
    const rows: Array<{ key_id: string; key: Buffer; expires_at: Date }> = await manager.query(
      'SELECT key_id::text, key, expires_at FROM cluster_time_keys WHERE expires_at > $1 ORDER BY expires_at',
      [since],
    );
    return rows.map((r) => ({ keyId: r.key_id, key: r.key.toString('base64'), expiresAt: r.expires_at.toISOString() }));
  }
}
