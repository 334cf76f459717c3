import { describe, expect, it } from 'vitest';
import { type AuthResource, type ClusterAction, type DatabaseAction, type RoleGrant, invalidGrant, isAuthorized } from './privileges.js';

const ns = (db: string, collection: string): AuthResource => ({ db, collection });
const cluster: AuthResource = { cluster: true };
const on = (role: RoleGrant['role'], db = 'admin'): RoleGrant[] => [{ role, db }];
const can = (grants: RoleGrant[], action: DatabaseAction | ClusterAction, resource: AuthResource) => isAuthorized(grants, action, resource);

describe('built-in roles', () => {
  it('read reads its own database only, and writes nothing', () => {
    const grants = on('read', 'shop');
    expect(can(grants, 'find', ns('shop', 'orders'))).toBe(true);
    expect(can(grants, 'listIndexes', ns('shop', 'orders'))).toBe(true);
    expect(can(grants, 'find', ns('other', 'orders'))).toBe(false);
    expect(can(grants, 'insert', ns('shop', 'orders'))).toBe(false);
    expect(can(grants, 'listShards', cluster)).toBe(false);
  });

  it('readWrite writes and creates and drops collections, but drops no database (as MongoDB)', () => {
    const grants = on('readWrite', 'shop');
    for (const action of ['find', 'insert', 'update', 'remove', 'createIndex', 'dropCollection', 'renameCollectionSameDB'] as const) {
      expect(can(grants, action, ns('shop', 'orders')), action).toBe(true);
    }
    expect(can(grants, 'dropDatabase', { db: 'shop' })).toBe(false);
    expect(can(grants, 'insert', ns('other', 'orders'))).toBe(false);
  });

  it('dbAdmin manages a database but reads no document', () => {
    const grants = on('dbAdmin', 'shop');
    expect(can(grants, 'dropDatabase', { db: 'shop' })).toBe(true);
    expect(can(grants, 'createIndex', ns('shop', 'orders'))).toBe(true);
    expect(can(grants, 'find', ns('shop', 'orders'))).toBe(false);
  });

  it('the AnyDatabase roles reach every database but config and local', () => {
    expect(can(on('readAnyDatabase'), 'find', ns('any', 'thing'))).toBe(true);
    expect(can(on('readAnyDatabase'), 'find', ns('config', 'chunks'))).toBe(false);
    expect(can(on('readWriteAnyDatabase'), 'insert', ns('any', 'thing'))).toBe(true);
    expect(can(on('readWriteAnyDatabase'), 'find', ns('any', 'thing'))).toBe(true);
    expect(can(on('readWriteAnyDatabase'), 'insert', ns('local', 'thing'))).toBe(false);
    expect(can(on('dbAdminAnyDatabase'), 'dropDatabase', { db: 'any' })).toBe(true);
  });

  it('clusterMonitor watches (and reads config) but changes nothing', () => {
    const grants = on('clusterMonitor');
    for (const action of ['listShards', 'listSessions', 'serverStatus', 'inprog', 'getClusterParameter', 'viewAuditLog'] as const) {
      expect(can(grants, action, cluster), action).toBe(true);
    }
    expect(can(grants, 'find', ns('config', 'chunks'))).toBe(true);
    expect(can(grants, 'update', ns('config', 'settings'))).toBe(false);
    expect(can(grants, 'moveChunk', ns('shop', 'orders'))).toBe(false);
    expect(can(grants, 'setClusterParameter', cluster)).toBe(false);
    expect(can(grants, 'find', ns('shop', 'orders'))).toBe(false);
  });

  it('clusterManager moves chunks, manages shards and the balancer, and reads no user data', () => {
    const grants = on('clusterManager');
    expect(can(grants, 'moveChunk', ns('shop', 'orders'))).toBe(true);
    expect(can(grants, 'enableSharding', { db: 'shop' })).toBe(true);
    expect(can(grants, 'addShard', cluster)).toBe(true);
    expect(can(grants, 'update', ns('config', 'settings'))).toBe(true);
    expect(can(grants, 'find', ns('shop', 'orders'))).toBe(false);
    expect(can(grants, 'killAnySession', cluster)).toBe(false);
    expect(can(grants, 'createUser', { db: 'admin' })).toBe(false);
  });

  it('userAdmin manages users only', () => {
    expect(can(on('userAdmin'), 'createUser', { db: 'admin' })).toBe(true);
    expect(can(on('userAdmin'), 'find', ns('admin', 'x'))).toBe(false);
    expect(can(on('userAdminAnyDatabase'), 'viewUser', cluster)).toBe(true);
  });

  it('dbOwner is readWrite, dbAdmin and userAdmin on its database', () => {
    const grants = on('dbOwner', 'shop');
    expect(can(grants, 'insert', ns('shop', 'a'))).toBe(true);
    expect(can(grants, 'dropDatabase', { db: 'shop' })).toBe(true);
    expect(can(grants, 'createUser', { db: 'shop' })).toBe(true);
    expect(can(grants, 'insert', ns('other', 'a'))).toBe(false);
  });

  it('root can do everything on every door', () => {
    const grants = on('root');
    for (const action of ['addShard', 'killAnySession', 'killop', 'setClusterParameter', 'viewAuditLog', 'viewUser'] as const) {
      expect(can(grants, action, cluster), action).toBe(true);
    }
    for (const action of ['find', 'insert', 'dropDatabase', 'moveChunk', 'createUser'] as const) {
      expect(can(grants, action, action === 'dropDatabase' ? { db: 'shop' } : ns('shop', 'orders')), action).toBe(true);
    }
    expect(can(grants, 'createUser', { db: 'admin' })).toBe(true);
  });

  it('grants nothing without a grant, and nothing of one database on another with a longer name', () => {
    expect(can([], 'find', ns('shop', 'orders'))).toBe(false);
    expect(can(on('readWrite', 'shop'), 'find', ns('shopping', 'orders'))).toBe(false);
    expect(can(on('readWrite', 'shop'), 'find', cluster)).toBe(false);
  });
});

describe('invalidGrant', () => {
  it('refuses unknown roles and adminOnly roles on another database', () => {
    expect(invalidGrant({ role: 'readWrite', db: 'shop' })).toBeUndefined();
    expect(invalidGrant({ role: 'root', db: 'admin' })).toBeUndefined();
    expect(invalidGrant({ role: 'superuser', db: 'admin' })).toMatch(/no built-in role/);
    expect(invalidGrant({ role: 'root', db: 'shop' })).toMatch(/only on admin/);
    expect(invalidGrant({ role: 'read', db: '' })).toMatch(/database/);
  });
});
