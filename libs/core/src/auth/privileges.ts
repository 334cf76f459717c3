/**
 * MongoDB's role-based access control, as far as Tessera's doors need it: actions on resources,
 * the built-in roles that grant them, and the check of one action on one resource. Names follow
 * MongoDB's `action_type.idl` and `builtin_roles.yml`; a role grants the subset of its MongoDB
 * actions that some Tessera operation asks for, so a user's grants read as they would in MongoDB.
 */

/** Actions on a collection or a database. */
export const DATABASE_ACTIONS = [
  'find',
  'insert',
  'update',
  'remove',
  'listCollections',
  'listIndexes',
  'collStats',
  'dbStats',
  'killCursors',
  'changeStream',
  'createCollection',
  'dropCollection',
  'createIndex',
  'dropIndex',
  'renameCollectionSameDB',
  'dropDatabase',
  'enableSharding',
  'refineCollectionShardKey',
  'splitChunk',
  'moveChunk',
  'clearJumboFlag',
  'createUser',
  'dropUser',
  'grantRole',
  'revokeRole',
  'viewUser',
  'viewRole',
  'changePassword',
] as const;

/** Actions on the cluster as a whole. */
export const CLUSTER_ACTIONS = [
  'addShard',
  'removeShard',
  'listShards',
  'listDatabases',
  'listSessions',
  'serverStatus',
  'inprog',
  'killop',
  'killAnySession',
  'cleanupOrphaned',
  'flushRouterConfig',
  'setClusterParameter',
  'getClusterParameter',
  'viewUser',
  'invalidateUserCache',
  'viewAuditLog',
  'viewClusterTimeKeys',
] as const;

/** An action on a database or a collection. */
export type DatabaseAction = (typeof DATABASE_ACTIONS)[number];
/** An action on the cluster. */
export type ClusterAction = (typeof CLUSTER_ACTIONS)[number];

/**
 * What an action is checked on: the cluster, a database (`collection` absent: the database
 * itself, as `dropDatabase` needs), or one collection.
 */
export type AuthResource = { readonly cluster: true } | { readonly db: string; readonly collection?: string };

/**
 * What a privilege applies to, as MongoDB's resource patterns: the cluster; a database and every
 * collection in it (`collection: ''`); every database but `local` and `config` (`db: ''`,
 * MongoDB's "any normal"); or one exact namespace.
 */
export type ResourcePattern = { readonly cluster: true } | { readonly db: string; readonly collection: string };

/** Actions allowed on the resources a pattern matches. */
export interface Privilege {
  readonly resource: ResourcePattern;
  readonly actions: readonly string[];
}

/** The built-in roles Tessera grants. */
export const BUILTIN_ROLES = [
  'read',
  'readWrite',
  'dbAdmin',
  'userAdmin',
  'dbOwner',
  'readAnyDatabase',
  'readWriteAnyDatabase',
  'dbAdminAnyDatabase',
  'userAdminAnyDatabase',
  'clusterMonitor',
  'clusterManager',
  'clusterAdmin',
  'root',
] as const;

/** A built-in role's name. */
export type BuiltinRoleName = (typeof BUILTIN_ROLES)[number];

/** A role granted to a user: on one database, or (for the roles MongoDB marks adminOnly) on `admin`. */
export interface RoleGrant {
  readonly role: BuiltinRoleName;
  readonly db: string;
}

/** The roles MongoDB grants only on `admin`: they reach every database or the cluster. */
export const ADMIN_ONLY_ROLES: ReadonlySet<BuiltinRoleName> = new Set([
  'readAnyDatabase',
  'readWriteAnyDatabase',
  'dbAdminAnyDatabase',
  'userAdminAnyDatabase',
  'clusterMonitor',
  'clusterManager',
  'clusterAdmin',
  'root',
]);

const READ = ['changeStream', 'collStats', 'dbStats', 'find', 'killCursors', 'listCollections', 'listIndexes'];
const READ_WRITE = [
  ...READ,
  'createCollection',
  'createIndex',
  'dropCollection',
  'dropIndex',
  'insert',
  'remove',
  'renameCollectionSameDB',
  'update',
];
const DB_ADMIN = [
  'collStats',
  'createCollection',
  'createIndex',
  'dbStats',
  'dropCollection',
  'dropDatabase',
  'dropIndex',
  'listCollections',
  'listIndexes',
  'renameCollectionSameDB',
];
const USER_ADMIN = ['changePassword', 'createUser', 'dropUser', 'grantRole', 'revokeRole', 'viewRole', 'viewUser'];
const CLUSTER: ResourcePattern = { cluster: true };
const ANY_NORMAL: ResourcePattern = { db: '', collection: '' };
const database = (db: string): ResourcePattern => ({ db, collection: '' });

/** A role's own privileges and the roles it includes, granted on `db`. */
function definition(role: BuiltinRoleName, db: string): { privileges: Privilege[]; includes: RoleGrant[] } {
  switch (role) {
    case 'read':
      return { privileges: [{ resource: database(db), actions: READ }], includes: [] };
    case 'readWrite':
      return { privileges: [{ resource: database(db), actions: READ_WRITE }], includes: [] };
    case 'dbAdmin':
      return { privileges: [{ resource: database(db), actions: DB_ADMIN }], includes: [] };
    case 'userAdmin':
      return { privileges: [{ resource: database(db), actions: USER_ADMIN }], includes: [] };
    case 'dbOwner':
      return { privileges: [], includes: ['readWrite', 'dbAdmin', 'userAdmin'].map((r) => ({ role: r as BuiltinRoleName, db })) };
    case 'readAnyDatabase':
      return {
        privileges: [
          { resource: ANY_NORMAL, actions: READ },
          { resource: CLUSTER, actions: ['listDatabases'] },
        ],
        includes: [],
      };
    case 'readWriteAnyDatabase':
      return { privileges: [{ resource: ANY_NORMAL, actions: READ_WRITE }], includes: [{ role: 'readAnyDatabase', db }] };
    case 'dbAdminAnyDatabase':
      return {
        privileges: [
          { resource: ANY_NORMAL, actions: DB_ADMIN },
          { resource: CLUSTER, actions: ['listDatabases'] },
        ],
        includes: [],
      };
    case 'userAdminAnyDatabase':
      return {
        privileges: [
          { resource: ANY_NORMAL, actions: USER_ADMIN },
          { resource: database('admin'), actions: USER_ADMIN },
          { resource: CLUSTER, actions: ['listDatabases', 'viewUser', 'invalidateUserCache'] },
        ],
        includes: [],
      };
    case 'clusterMonitor':
      return {
        privileges: [
          {
            resource: CLUSTER,
            actions: ['getClusterParameter', 'inprog', 'listDatabases', 'listSessions', 'listShards', 'serverStatus', 'viewAuditLog'],
          },
          { resource: ANY_NORMAL, actions: ['collStats', 'dbStats'] },
        ],
        includes: [{ role: 'read', db: 'config' }],
      };
    case 'clusterManager':
      return {
        privileges: [
          {
            resource: CLUSTER,
            actions: [
              'addShard',
              'cleanupOrphaned',
              'flushRouterConfig',
              'getClusterParameter',
              'listSessions',
              'listShards',
              'removeShard',
              'setClusterParameter',
            ],
          },
          { resource: ANY_NORMAL, actions: ['clearJumboFlag', 'enableSharding', 'moveChunk', 'refineCollectionShardKey', 'splitChunk'] },
          { resource: database('config'), actions: ['insert', 'remove', 'update'] },
        ],
        includes: [{ role: 'read', db: 'config' }],
      };
    case 'clusterAdmin':
      return {
        // hostManager's share (killop, killAnySession, killCursors anywhere) is folded in here, and
        // Tessera's own viewClusterTimeKeys: the signing keys' ids and lifetimes, for operators.
        privileges: [
          { resource: CLUSTER, actions: ['killAnySession', 'killop', 'viewClusterTimeKeys'] },
          { resource: ANY_NORMAL, actions: ['dropDatabase', 'killCursors'] },
        ],
        includes: [
          { role: 'clusterMonitor', db },
          { role: 'clusterManager', db },
        ],
      };
    case 'root':
      return {
        privileges: [],
        includes: (['clusterAdmin', 'userAdminAnyDatabase', 'dbAdminAnyDatabase', 'readWriteAnyDatabase'] as const).map((r) => ({
          role: r,
          db,
        })),
      };
  }
}

/** Grants' privileges as worked out once: a check on the data path looks them up, it does not rebuild the role graph. */
const expanded = new Map<string, readonly Privilege[]>();
/** Databases past which the memo stops growing (roles granted on that many databases are worked out each time). */
const MAX_EXPANDED = 10_000;

/** Every privilege a grant gives, its included roles' too. */
export function privilegesOf(grant: RoleGrant): readonly Privilege[] {
  const key = `${grant.role}\u0000${grant.db}`;
  const known = expanded.get(key);
  if (known !== undefined) return known;
  const { privileges, includes } = definition(grant.role, grant.db);
  const all = [...privileges, ...includes.flatMap(privilegesOf)];
  if (expanded.size < MAX_EXPANDED) expanded.set(key, all);
  return all;
}

/** Why a grant is not valid (an unknown role, an adminOnly role on another database), or undefined. */
export function invalidGrant(grant: { role: string; db: string }): string | undefined {
  if (!(BUILTIN_ROLES as readonly string[]).includes(grant.role)) return `no built-in role is named ${JSON.stringify(grant.role)}`;
  if (grant.db === '') return 'a role is granted on a database';
  if (ADMIN_ONLY_ROLES.has(grant.role as BuiltinRoleName) && grant.db !== 'admin') return `${grant.role} is granted only on admin`;
  return undefined;
}

/** The databases `any normal` skips, as MongoDB's does: they hold the cluster's own state. */
const NOT_NORMAL = new Set(['config', 'local']);

/** Whether `pattern` covers `resource`. */
export function patternMatches(pattern: ResourcePattern, resource: AuthResource): boolean {
  if ('cluster' in pattern) return 'cluster' in resource;
  if ('cluster' in resource) return false;
  if (pattern.db === '') return !NOT_NORMAL.has(resource.db) && pattern.collection === '';
  if (pattern.db !== resource.db) return false;
  return pattern.collection === '' || pattern.collection === resource.collection;
}

/** Whether the grants allow `action` on `resource`. */
export function isAuthorized(grants: readonly RoleGrant[], action: DatabaseAction | ClusterAction, resource: AuthResource): boolean {
  for (const grant of grants) {
    for (const privilege of privilegesOf(grant)) {
      if (privilege.actions.includes(action) && patternMatches(privilege.resource, resource)) return true;
    }
  }
  return false;
}
