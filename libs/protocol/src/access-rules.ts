/**
 * The one table of what every public door asks of its caller: each REST route of a router, each
 * root field of the control plane's GraphQL schema and each socket.io room. `access-rules.spec.ts`
 * walks the OpenAPI document and the schema and fails on a door without a rule (or a rule
 * without a door). A rule is one of:
 *
 * - `public`: anyone, signed in or not (MongoDB's `hello` needs no authentication either);
 * - `signedIn`: any user; what the call touches is the caller's own (its sessions, cursors and
 *   transactions), which the handler checks against the owner;
 * - `privileges`: the actions the call needs, on the resources its input names. The function
 *   reads the raw, unvalidated input and is total: input it cannot read needs only a signed-in
 *   caller, whom the door's validation then refuses with 400 before anything runs.
 */
import { type AuthResource, type ClusterAction, type DatabaseAction, type RoleGrant, TesseraError, isAuthorized } from '@tessera/core';
import { AUDIT_ROOM } from './event-messages.js';

/** One action a call needs, on one resource. */
export interface RequiredPrivilege {
  readonly action: DatabaseAction | ClusterAction;
  readonly resource: AuthResource;
}

/** A call's input as the door has it: path parameters and the body (REST), or the arguments (GraphQL). */
export interface AccessInput {
  readonly params: Readonly<Record<string, string | undefined>>;
  readonly body: unknown;
}

/** What a door asks of its caller. */
export type AccessRule =
  | { readonly kind: 'public' }
  | { readonly kind: 'signedIn' }
  | { readonly kind: 'privileges'; readonly needs: (input: AccessInput) => RequiredPrivilege[] };

const PUBLIC: AccessRule = { kind: 'public' };
const SIGNED_IN: AccessRule = { kind: 'signedIn' };
const CLUSTER = { cluster: true } as const;

function rule(needs: (input: AccessInput) => RequiredPrivilege[]): AccessRule {
  return { kind: 'privileges', needs };
}

/** `action` on the cluster. */
const onCluster = (action: ClusterAction): AccessRule => rule(() => [{ action, resource: CLUSTER }]);

/** `actions` on one of the cluster's own collections (`config.<collection>`), as MongoDB checks its sharding commands. */
const onConfig = (collection: string, ...actions: DatabaseAction[]): AccessRule =>
  rule(() => actions.map((action) => ({ action, resource: { db: 'config', collection } })));

/** `actions` on the `admin` database, where Tessera keeps its users (MongoDB's admin.system.users). */
const onAdmin = (...actions: DatabaseAction[]): AccessRule => rule(() => actions.map((action) => ({ action, resource: { db: 'admin' } })));

/** The resource a `db.coll` string names, or undefined when it names none. */
export function namespaceResource(ns: unknown): AuthResource | undefined {
  if (typeof ns !== 'string') return undefined;
  const dot = ns.indexOf('.');
  if (dot <= 0 || dot === ns.length - 1) return undefined;
  return { db: ns.slice(0, dot), collection: ns.slice(dot + 1) };
}

const at = (resource: AuthResource, ...actions: DatabaseAction[]): RequiredPrivilege[] => actions.map((action) => ({ action, resource }));

/** The collection the route's `{db}/{coll}` names. */
function pathNamespace(params: AccessInput['params']): { db: string; collection: string } | undefined {
  return params.db === undefined || params.coll === undefined ? undefined : { db: params.db, collection: params.coll };
}

/** `actions` on the collection the route's `{db}/{coll}` names. */
const onPathNamespace = (...actions: DatabaseAction[]): AccessRule =>
  rule(({ params }) => {
    const resource = pathNamespace(params);
    return resource === undefined ? [] : at(resource, ...actions);
  });

const field = (body: unknown, name: string): unknown =>
  typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)[name] : undefined;

/** `actions` on the namespace in argument `name` (or `input.<name>`) of a GraphQL field. */
const onArgNamespace = (name: string, ...actions: DatabaseAction[]): AccessRule =>
  rule(({ body }) => {
    const resource = namespaceResource(field(body, name) ?? field(field(body, 'input'), name));
    return resource === undefined ? [] : actions.map((action) => ({ action, resource }));
  });

/** `action` on the database in argument `db`. */
const onArgDatabase = (action: DatabaseAction): AccessRule =>
  rule(({ body }) => {
    const db = field(body, 'db');
    return typeof db === 'string' && db !== '' ? [{ action, resource: { db } }] : [];
  });

/** update needs insert too when one of its statements upserts. */
function updateNeeds({ params, body }: AccessInput): RequiredPrivilege[] {
  const resource = pathNamespace(params);
  if (resource === undefined) return [];
  const updates = field(body, 'updates');
  const upsert = Array.isArray(updates) && updates.some((u) => field(u, 'upsert') === true);
  return at(resource, 'update', ...(upsert ? (['insert'] as const) : []));
}

/** findAndModify reads, then updates (inserting on upsert) or removes, as MongoDB checks it. */
function findAndModifyNeeds({ params, body }: AccessInput): RequiredPrivilege[] {
  const resource = pathNamespace(params);
  if (resource === undefined) return [];
  if (field(body, 'remove') === true) return at(resource, 'find', 'remove');
  return at(resource, 'find', 'update', ...(field(body, 'upsert') === true ? (['insert'] as const) : []));
}

/** aggregate reads its collection and those its stages join; a final `$out` or `$merge` writes its target. */
function aggregateNeeds({ params, body }: AccessInput): RequiredPrivilege[] {
  const source = pathNamespace(params);
  if (source === undefined) return [];
  const db = source.db;
  const needs = at(source, 'find');
  const pipeline = field(body, 'pipeline');
  if (!Array.isArray(pipeline)) return needs;
  const inDb = (target: unknown): AuthResource | undefined => {
    if (typeof target === 'string') return { db, collection: target };
    const targetDb = field(target, 'db') ?? db;
    const coll = field(target, 'coll');
    return typeof targetDb === 'string' && typeof coll === 'string' ? { db: targetDb, collection: coll } : undefined;
  };
  const visit = (stages: unknown[]): void => {
    for (const stage of stages) {
      for (const name of ['$lookup', '$graphLookup', '$unionWith']) {
        const spec = field(stage, name);
        if (spec === undefined) continue;
        const from = inDb(typeof spec === 'string' ? spec : (field(spec, 'from') ?? field(spec, 'coll')));
        if (from !== undefined) needs.push(...at(from, 'find'));
        const inner = field(spec, 'pipeline');
        if (Array.isArray(inner)) visit(inner);
      }
      const out = field(stage, '$out');
      const outTarget = out === undefined ? undefined : inDb(out);
      if (outTarget !== undefined) needs.push(...at(outTarget, 'insert', 'remove'));
      const merge = field(stage, '$merge');
      const mergeTarget = merge === undefined ? undefined : inDb(typeof merge === 'string' ? merge : field(merge, 'into'));
      if (mergeTarget !== undefined) needs.push(...at(mergeTarget, 'insert', 'update'));
    }
  };
  visit(pipeline);
  return needs;
}

/** bulkWrite: each operation's action on the namespace its `nsInfo` entry names. */
function bulkWriteNeeds({ body }: AccessInput): RequiredPrivilege[] {
  const nsInfo = field(body, 'nsInfo');
  const ops = field(body, 'ops');
  if (!Array.isArray(nsInfo) || !Array.isArray(ops)) return [];
  const needs: RequiredPrivilege[] = [];
  for (const op of ops) {
    for (const [name, action] of [
      ['insert', 'insert'],
      ['update', 'update'],
      ['delete', 'remove'],
    ] as const) {
      const index = field(op, name);
      const resource = typeof index === 'number' ? namespaceResource(field(nsInfo[index], 'ns')) : undefined;
      if (resource !== undefined) needs.push({ action, resource });
      if (resource !== undefined && name === 'update' && field(op, 'upsert') === true) needs.push({ action: 'insert', resource });
    }
  }
  return needs;
}

/** renameCollection within a database needs renameCollectionSameDB on both names; across databases, MongoDB's copy-and-drop set. */
function renameNeeds({ body }: AccessInput): RequiredPrivilege[] {
  const from = namespaceResource(field(body, 'renameCollection'));
  const to = namespaceResource(field(body, 'to'));
  if (from === undefined || to === undefined || 'cluster' in from || 'cluster' in to) return [];
  if (from.db === to.db) return [...at(from, 'renameCollectionSameDB'), ...at(to, 'renameCollectionSameDB')];
  return [...at(from, 'find', 'dropCollection'), ...at(to, 'insert', 'createCollection', 'createIndex')];
}

/** Every REST route of a router, by `METHOD /path` as the OpenAPI document writes it. */
export const REST_ACCESS_RULES: Readonly<Record<string, AccessRule>> = {
  'GET /v1/hello': PUBLIC,
  'GET /v1/openapi.json': PUBLIC,
  'GET /v1/docs': PUBLIC,
  'GET /v1/admin/currentOp': onCluster('inprog'),
  'POST /v1/{db}/{coll}/insert': onPathNamespace('insert'),
  'POST /v1/{db}/{coll}/find': onPathNamespace('find'),
  'POST /v1/{db}/{coll}/update': rule(updateNeeds),
  'POST /v1/{db}/{coll}/delete': onPathNamespace('remove'),
  'POST /v1/{db}/{coll}/findAndModify': rule(findAndModifyNeeds),
  'POST /v1/{db}/{coll}/aggregate': rule(aggregateNeeds),
  'POST /v1/{db}/{coll}/count': onPathNamespace('find'),
  'POST /v1/{db}/{coll}/distinct': onPathNamespace('find'),
  'POST /v1/{db}/{coll}/indexes': onPathNamespace('createIndex'),
  'GET /v1/{db}/{coll}/indexes': onPathNamespace('listIndexes'),
  'DELETE /v1/{db}/{coll}/indexes/{name}': onPathNamespace('dropIndex'),
  'POST /v1/{db}/{coll}/documents': onPathNamespace('insert'),
  'GET /v1/{db}/{coll}/documents/{id}': onPathNamespace('find'),
  'PUT /v1/{db}/{coll}/documents/{id}': onPathNamespace('update'),
  'PATCH /v1/{db}/{coll}/documents/{id}': onPathNamespace('update'),
  'DELETE /v1/{db}/{coll}/documents/{id}': onPathNamespace('remove'),
  // A cursor is its opener's: the registry answers CursorNotFound to anyone else.
  'POST /v1/cursors/{id}/next': SIGNED_IN,
  'DELETE /v1/cursors/{id}': SIGNED_IN,
  'POST /v1/admin/renameCollection': rule(renameNeeds),
  'POST /v1/admin/bulkWrite': rule(bulkWriteNeeds),
  // A session is its starter's (lsid.uid); killing another user's sessions needs killAnySession.
  'POST /v1/admin/startSession': SIGNED_IN,
  'POST /v1/admin/refreshSessions': SIGNED_IN,
  'POST /v1/admin/endSessions': SIGNED_IN,
  'POST /v1/admin/killSessions': SIGNED_IN,
  'POST /v1/admin/commitTransaction': SIGNED_IN,
  'POST /v1/admin/abortTransaction': SIGNED_IN,
};

/** Every root field of the control plane's schema, by `Type.field`. */
export const GRAPHQL_ACCESS_RULES: Readonly<Record<string, AccessRule>> = {
  'Query.whoAmI': SIGNED_IN,
  // Every Tessera user is in admin: viewUser on admin, as MongoDB's usersInfo on that database asks.
  'Query.users': onAdmin('viewUser'),
  'Query.apiKeys': onAdmin('viewUser'),
  'Query.auditLog': onCluster('viewAuditLog'),
  'Mutation.createUser': onAdmin('createUser'),
  'Mutation.updateUser': onAdmin('grantRole', 'revokeRole', 'changePassword'),
  'Mutation.dropUser': onAdmin('dropUser'),
  'Mutation.createApiKey': onAdmin('changePassword'),
  'Mutation.revokeApiKey': onAdmin('changePassword'),
  'Query.balancerCollectionStatus': onConfig('collections', 'find'),
  'Query.balancerStatus': onConfig('settings', 'find'),
  'Query.changelog': onConfig('changelog', 'find'),
  'Query.chunkForKey': onConfig('chunks', 'find'),
  'Query.cluster': onCluster('listShards'),
  'Query.clusterSettings': onCluster('getClusterParameter'),
  'Query.clusterTimeKeys': onCluster('viewClusterTimeKeys'),
  'Query.collection': onConfig('collections', 'find'),
  'Query.ddlOperations': onCluster('inprog'),
  'Query.migrations': onConfig('migrations', 'find'),
  'Query.sessions': onCluster('listSessions'),
  'Query.settings': onCluster('getClusterParameter'),
  'Query.transactions': onCluster('inprog'),
  'Mutation.abortTransaction': onCluster('killAnySession'),
  'Mutation.resolveTransaction': onCluster('killAnySession'),
  'Mutation.addShard': onCluster('addShard'),
  'Mutation.removeShard': onCluster('removeShard'),
  'Mutation.addShardToZone': onConfig('shards', 'update'),
  'Mutation.removeShardFromZone': onConfig('shards', 'update'),
  'Mutation.updateZoneKeyRange': onConfig('tags', 'update'),
  'Mutation.clearJumboFlag': onArgNamespace('ns', 'clearJumboFlag'),
  'Mutation.configureCollectionBalancing': onConfig('collections', 'update'),
  'Mutation.dropCollection': onArgNamespace('ns', 'dropCollection'),
  'Mutation.dropDatabase': onArgDatabase('dropDatabase'),
  'Mutation.enableSharding': onArgDatabase('enableSharding'),
  'Mutation.shardCollection': onArgNamespace('ns', 'enableSharding'),
  'Mutation.refineCollectionShardKey': onArgNamespace('ns', 'refineCollectionShardKey'),
  'Mutation.splitChunk': onArgNamespace('ns', 'splitChunk'),
  'Mutation.mergeChunks': onArgNamespace('ns', 'splitChunk'),
  'Mutation.moveChunk': onArgNamespace('ns', 'moveChunk'),
  'Mutation.moveRange': onArgNamespace('ns', 'moveChunk'),
  'Mutation.movePrimary': onArgDatabase('moveChunk'),
  'Mutation.setBalancerState': onConfig('settings', 'update'),
  'Mutation.updateClusterSettings': onCluster('setClusterParameter'),
  'Subscription.balancerRound': onConfig('actionlog', 'find'),
  'Subscription.changelog': onConfig('changelog', 'find'),
  'Subscription.chunkPlacementChanged': onConfig('chunks', 'find'),
  'Subscription.migrationProgress': onConfig('migrations', 'find'),
  'Subscription.sessionEvents': onCluster('listSessions'),
  'Subscription.topologyChanged': onCluster('listShards'),
  'Subscription.transactionEvents': onCluster('inprog'),
};

/** Every socket.io room kind: `topic:<topic>` by topic, and `ns:` for a namespace's events. */
export const SOCKET_ACCESS_RULES: Readonly<Record<string, AccessRule>> = {
  'topic:placement': onConfig('chunks', 'find'),
  'topic:migrations': onConfig('migrations', 'find'),
  'topic:balancer': onConfig('actionlog', 'find'),
  'topic:topology': onCluster('listShards'),
  'topic:ddl': onConfig('changelog', 'find'),
  'topic:sessions': onCluster('listSessions'),
  'topic:transactions': onCluster('inprog'),
  'topic:reports': onConfig('changelog', 'find'),
  'ns:': onConfig('changelog', 'find'),
  [AUDIT_ROOM]: onCluster('viewAuditLog'),
};

/** The first privilege of `rule` on `input` that `roles` lack; undefined when they lack none (or the rule names none). */
export function missingPrivilege(rule: AccessRule, input: AccessInput, roles: readonly RoleGrant[]): RequiredPrivilege | undefined {
  if (rule.kind !== 'privileges') return undefined;
  return rule.needs(input).find(({ action, resource }) => !isAuthorized(roles, action, resource));
}

/** The refusal of a call that lacks `missing`, as MongoDB words it: FORBIDDEN, naming only what the caller sent. */
export function notAuthorized(missing: RequiredPrivilege): TesseraError {
  const on = 'cluster' in missing.resource ? 'the cluster' : missing.resource.db;
  return new TesseraError('FORBIDDEN', `not authorized on ${on} to execute ${missing.action}`);
}

/** A database no role is granted on (`$` is not allowed in a database name): only grants on every database reach it. */
const PROBE_DB = '$any';

/**
 * The doors of `rules` that `roles` may use whatever their input: public and signed-in ones, and
 * those whose privileges the roles hold on the cluster and on every database. A client (the
 * dashboard) shows what these name and hides the rest.
 */
export function doorsAllowed(rules: Readonly<Record<string, AccessRule>>, roles: readonly RoleGrant[]): string[] {
  const probe: AccessInput = {
    params: { db: PROBE_DB, coll: 'any' },
    body: { ns: `${PROBE_DB}.any`, db: PROBE_DB, input: { ns: `${PROBE_DB}.any` } },
  };
  return Object.entries(rules)
    .filter(([, rule]) => missingPrivilege(rule, probe, roles) === undefined)
    .map(([door]) => door);
}
