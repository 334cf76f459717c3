import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import type { LeaderService } from '../leader/leader.service.js';
import { ClusterTimeKeysService } from './cluster-time-keys.service.js';
import { ClusterTimeKeysStore } from './cluster-time-keys.store.js';

let db: TestDatabase;
let keys: ClusterTimeKeysService;
const INTERVAL = 100;
const settings = { TESSERA_NODE_NAME: 'config-test', TESSERA_KEYS_ROTATION_INTERVAL_SECS: INTERVAL } as ConfigSettings;
const t0 = new Date('2026-11-26T00:00:00Z');
const at = (seconds: number) => new Date(t0.getTime() + seconds * 1000);

beforeAll(async () => {
  db = await createTestDatabase('config');
  keys = new ClusterTimeKeysService(
    db.dataSource,
    new ClusterTimeKeysStore(),
    new ChangelogService(settings),
    {} as LeaderService,
    settings,
    pino({ level: 'silent' }),
  );
});
afterAll(async () => db?.drop());

const expiries = async (now: Date) => (await keys.keys(now)).keys.map((k) => k.expiresAt);

describe('cluster time keys', () => {
  it('keeps the signing key and the next one ahead, rotates when the first expires, and serves a key one interval past its expiry', async () => {
    const first = await keys.generateIfNeeded(t0);
    expect(first).toHaveLength(2);
    expect(await keys.generateIfNeeded(at(10))).toEqual([]);
    expect(await expiries(at(10))).toEqual([at(100).toISOString(), at(200).toISOString()]);

    // The first key stops signing at 100 s: one more is made, 100 s after the last.
    const rotated = await keys.generateIfNeeded(at(101));
    expect(rotated).toHaveLength(1);
    expect(BigInt(rotated[0]!)).toBeGreaterThan(BigInt(first[1]!));
    expect(await expiries(at(150))).toEqual([100, 200, 300].map((s) => at(s).toISOString()));
    // An interval after it stopped signing, the first key no longer verifies.
    expect(await expiries(at(201))).toEqual([200, 300].map((s) => at(s).toISOString()));

    const logged: Array<{ details: { keyId: string } }> = await db.dataSource.query(
      "SELECT details FROM changelog WHERE what = 'clusterTimeKey.generated' ORDER BY id",
    );
    expect(logged.map((r) => r.details.keyId)).toEqual([...first, ...rotated]);
    expect(JSON.stringify(logged)).not.toContain((await keys.keys(at(10))).keys[0]!.key);
  });

  it('lists every key ever generated, newest first, with its id and expiry and never its secret', async () => {
    await keys.generateIfNeeded(t0);
    const stored: Array<{ key_id: string; expires_at: Date }> = await db.dataSource.query(
      'SELECT key_id::text, expires_at FROM cluster_time_keys',
    );
    const newestFirst = stored.sort((a, b) => (BigInt(b.key_id) > BigInt(a.key_id) ? 1 : -1));
    expect(newestFirst.length).toBeGreaterThanOrEqual(2);

    const listed = await keys.expiries();
    expect(listed).toEqual(newestFirst.map((r) => ({ keyId: r.key_id, expiresAt: r.expires_at })));
    expect(listed[0]).not.toHaveProperty('key');
  });
});
