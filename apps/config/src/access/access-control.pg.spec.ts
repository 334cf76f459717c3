import type { Logger } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { errorOf } from '../../../../test/errors.js';
import type { ConfigSettings } from '../config.settings.js';
import { AccessControlService } from './access-control.service.js';
import type { LeaderService } from '../leader/leader.service.js';
import { AccessStore } from './access.store.js';
import { AuditFeed } from './audit-feed.service.js';

let db: TestDatabase;
let store: AccessStore;

const ROOT_KEY = 'r'.repeat(40);
const settings = {
  TESSERA_NODE_NAME: 'config-test',
  TESSERA_PORT: 7080,
  TESSERA_ROOT_KEY: ROOT_KEY,
  TESSERA_VIEWER_TOKEN: 'v'.repeat(20),
} as ConfigSettings;
const logger = { info: () => undefined } as unknown as Logger;
const actor = { user: 'root', remoteAddress: '127.0.0.1' };
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

async function started(overrides: Partial<ConfigSettings> = {}): Promise<AccessControlService> {
  const service = new AccessControlService(store, { ...settings, ...overrides }, logger);
  await service.onModuleInit();
  return service;
}

beforeAll(async () => {
  db = await createTestDatabase('config');
  store = new AccessStore(db.dataSource);
});
afterAll(async () => db?.drop());
beforeEach(async () => {
  await db.dataSource.query('DELETE FROM users');
  await db.dataSource.query('DELETE FROM audit_log');
});

describe('the users from the environment', () => {
  it('makes root and viewer with their keys, idempotently, and follows a changed key', async () => {
    const access = await started();
    const generation = await access.generation();
    expect((await access.authenticate(`Bearer ${ROOT_KEY}`, '127.0.0.1', 'router0')).principal).toEqual({
      user: 'root',
      roles: [{ role: 'root', db: 'admin' }],
      keyId: 'root',
    });
    expect((await access.authenticate(`Bearer ${'v'.repeat(20)}`, undefined, 'n')).principal.roles).toEqual([
      { role: 'clusterMonitor', db: 'admin' },
    ]);
    await started();
    expect(await access.generation()).toBe(generation);
    const next = await started({ TESSERA_ROOT_KEY: 's'.repeat(40) });
    expect(await next.generation()).toBe(generation + 1);
    // Roles that changed with a new release move the generation too, so nodes read them again.
    await db.dataSource.query(`UPDATE users SET roles = '[]' WHERE name = 'viewer'`);
    await started({ TESSERA_ROOT_KEY: 's'.repeat(40) });
    expect(await next.generation()).toBe(generation + 2);
    expect(await errorOf(next.authenticate(`Bearer ${ROOT_KEY}`, '127.0.0.1', 'n'))).toMatchObject({ code: 'AUTHENTICATION_FAILED' });
  });
});

describe('sign-ins', () => {
  it('verifies a password and a key, and refuses a wrong one of each the same way, auditing the refusals', async () => {
    const access = await started();
    await access.createUser(actor, { name: 'ana', password: 'correct horse battery', roles: [{ role: 'readWrite', db: 'shop' }] });
    const key = await access.createApiKey(actor, { user: 'ana', description: 'ci' });
    expect(key.key).toMatch(/^tsk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
    const byPassword = await access.authenticate(basic('ana', 'correct horse battery'), '10.0.0.1', 'router0');
    expect(byPassword.principal).toEqual({ user: 'ana', roles: [{ role: 'readWrite', db: 'shop' }] });
    expect((await access.authenticate(`Bearer ${key.key}`, '10.0.0.1', 'router0')).principal).toMatchObject({ user: 'ana', keyId: key.id });
    const refusals = [
      basic('ana', 'wrong horse battery'),
      basic('nobody', 'correct horse battery'),
      `Bearer ${key.key}x`,
      'Bearer',
      'Digest x',
    ];
    for (const header of refusals) {
      const error = await errorOf(access.authenticate(header, '10.0.0.2', 'router0'));
      expect(error, header).toMatchObject({ code: 'AUTHENTICATION_FAILED', message: 'Authentication failed.' });
    }
    const audit: Array<{ action: string; outcome: string; remote_address: string }> = await db.dataSource.query(
      "SELECT action, outcome, remote_address FROM audit_log WHERE action = 'authenticate' ORDER BY seq",
    );
    expect(audit).toHaveLength(refusals.length);
    expect(audit.every((a) => a.outcome === 'refused' && a.remote_address === '10.0.0.2')).toBe(true);
  });

  it('stores no password and no key, only their hashes', async () => {
    const access = await started();
    await access.createUser(actor, { name: 'bo', password: 'a long enough password', roles: [] });
    const { key } = await access.createApiKey(actor, { user: 'bo' });
    const dump = JSON.stringify([
      await db.dataSource.query('SELECT * FROM users'),
      await db.dataSource.query("SELECT id, encode(digest, 'hex') FROM api_keys"),
    ]);
    expect(dump).not.toContain('a long enough password');
    expect(dump).not.toContain(key);
    expect(dump).toMatch(/scrypt\$32768\$8\$1\$/);
  });
});

describe('user changes', () => {
  it('move the generation and are audited; a dropped user signs in no more, nor do its keys', async () => {
    const access = await started();
    const before = await access.generation();
    await access.createUser(actor, { name: 'cy', password: 'twelve chars!', roles: [{ role: 'read', db: 'a' }] });
    const { key } = await access.createApiKey(actor, { user: 'cy' });
    const updated = await access.updateUser(actor, { name: 'cy', roles: [{ role: 'readWrite', db: 'a' }] });
    expect(updated.roles).toEqual([{ role: 'readWrite', db: 'a' }]);
    expect((await access.authenticate(`Bearer ${key}`, undefined, 'n')).principal.roles).toEqual([{ role: 'readWrite', db: 'a' }]);
    await access.dropUser(actor, 'cy');
    expect(await access.generation()).toBe(before + 4);
    expect(await errorOf(access.authenticate(`Bearer ${key}`, undefined, 'n'))).toMatchObject({ code: 'AUTHENTICATION_FAILED' });
    expect(await errorOf(access.authenticate(basic('cy', 'twelve chars!'), undefined, 'n'))).toMatchObject({
      code: 'AUTHENTICATION_FAILED',
    });
    const audit: Array<{ action: string; target: string; outcome: string; user_name: string }> = await db.dataSource.query(
      'SELECT action, target, outcome, user_name FROM audit_log ORDER BY seq',
    );
    expect(audit.map((a) => `${a.user_name} ${a.action} ${a.target} ${a.outcome}`)).toEqual([
      'root createUser cy ok',
      'root createApiKey cy ok',
      'root updateUser cy ok',
      'root dropUser cy ok',
      'null authenticate null refused',
      'cy authenticate null refused',
    ]);
  });

  it('refuse bad names, roles, passwords and duplicates, changing nothing', async () => {
    const access = await started();
    const before = await access.generation();
    await access.createUser(actor, { name: 'dee', roles: [] });
    const refused = [
      () => access.createUser(actor, { name: 'dee', roles: [] }),
      () => access.createUser(actor, { name: 'a:b', roles: [] }),
      () => access.createUser(actor, { name: 'eve', roles: [{ role: 'root', db: 'shop' }] }),
      () => access.createUser(actor, { name: 'eve', password: 'short', roles: [] }),
      () => access.updateUser(actor, { name: 'nobody', roles: [] }),
      () => access.revokeApiKey(actor, 'nope'),
    ];
    const codes = [];
    for (const attempt of refused) codes.push((await errorOf(attempt())).code);
    expect(codes).toEqual(['DUPLICATE_KEY', 'BAD_VALUE', 'BAD_VALUE', 'BAD_VALUE', 'NOT_FOUND', 'NOT_FOUND']);
    expect(await access.generation()).toBe(before + 1);
    expect((await access.users()).map((u) => u.name).sort()).toEqual(['dee', 'root', 'viewer']);
  });
});

describe('the audit log as a stream, and its retention', () => {
  const entry = (action: string) => ({
    user: 'root',
    remoteAddress: null,
    node: 'router0',
    action,
    target: null,
    outcome: 'ok' as const,
    details: {},
  });

  it('streams every entry written after the feed started, by any writer, once each and in order', async () => {
    await store.appendAudit([entry('before')]);
    const leader = { register: () => undefined } as unknown as LeaderService;
    const feed = new AuditFeed(store, leader, { ...settings, TESSERA_DATABASE_URL: db.url }, logger);
    await feed.onModuleInit();
    const seen: string[] = [];
    const subscription = feed.stream().subscribe((record) => seen.push(record.action));
    // Another store, as another config server writes.
    const other = new AccessStore(db.dataSource);
    await other.appendAudit([entry('one'), entry('two')]);
    await store.appendAudit([entry('three')]);
    for (let i = 0; i < 100 && seen.length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(seen).toEqual(['one', 'two', 'three']);
    subscription.unsubscribe();
    await feed.onApplicationShutdown();
  });

  it('deletes the entries older than the cut, in batches, and keeps the rest', async () => {
    await store.appendAudit([entry('old'), entry('older'), entry('new')]);
    await db.dataSource.query(`UPDATE audit_log SET at = now() - interval '100 days' WHERE action IN ('old', 'older')`);
    expect(await store.pruneAudit(new Date(Date.now() - 90 * 86_400_000), 1)).toBe(2);
    expect((await store.audit({ limit: 10 })).map((r) => r.action)).toEqual(['new']);
  });
});
