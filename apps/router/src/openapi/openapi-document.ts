/**
 * The public API's OpenAPI 3.1 document. Request bodies come from the zod schemas that
 * validate them (`api/request-schemas.ts`), so the document and the validation agree;
 * responses are described here. `openapi.spec.ts` checks that every route the controllers
 * register is described.
 */
import { z } from 'zod';
import {
  bulkWriteBodySchema,
  renameCollectionBodySchema,
  countBodySchema,
  createIndexesBodySchema,
  deleteBodySchema,
  aggregateBodySchema,
  distinctBodySchema,
  documentSchema,
  findAndModifyBodySchema,
  findBodySchema,
  insertBodySchema,
  nextBodySchema,
  updateBodySchema,
} from '../api/request-schemas.js';
import { type JsonSchema, type Operation, obj, ok, ref } from './operation.js';
import { SESSION_OPERATIONS } from './session-operations.js';

const count = { type: 'integer', minimum: 0 };
const byIndex = { type: 'object', additionalProperties: true, description: 'Values by statement index ("0", "1", ...).' };
const writeErrors = { type: 'array', items: ref('WriteError') };
const retriedStmtIds = {
  type: 'array',
  items: count,
  description: "In a retryable write (lsid and txnNumber): the statements answered from the session's history, not run again.",
};
const WRITE_REQUIRED = ['writeErrors', 'ok'];

const ns = '/v1/{db}/{coll}';
const OPERATIONS: readonly Operation[] = [
  {
    tag: 'router',
    method: 'get',
    path: '/v1/hello',
    summary: 'MongoDB\'s hello: msg "isdbgrid" says this is a router (mongos)',
    description:
      'Answers topologyVersion. While the router quiesces before a shutdown (TESSERA_QUIESCE_MS after SIGTERM) it answers 503 ShutdownInProgress with isWritablePrimary: false: operations still run, and a client sends new ones to another router.',
    response: { type: 'object', additionalProperties: true },
  },
  {
    tag: 'router',
    method: 'get',
    path: '/v1/openapi.json',
    summary: 'This OpenAPI document',
    response: { type: 'object', additionalProperties: true },
  },
  { tag: 'router', method: 'get', path: '/v1/docs', summary: 'This document as an HTML page', response: { type: 'string' } },
  {
    tag: 'router',
    method: 'get',
    path: '/v1/admin/currentOp',
    summary: "currentOp: this router's operations in progress",
    description:
      'One entry per operation, as MongoDB\'s inprog: opid, op (insert, update, remove, query, command), ns, command (its name, collection, $db, and the comment and maxTimeMS it was sent with), secs_running, microsecs_running, lsid. Operations that took TESSERA_SLOW_OP_MS or longer are logged ("Slow query") with the same fields.',
    response: obj({ inprog: { type: 'array', items: { type: 'object', additionalProperties: true } }, ok }, ['inprog', 'ok']),
  },
  {
    tag: 'crud',
    method: 'post',
    path: `${ns}/insert`,
    summary: 'insertMany',
    description: 'Creates the database and collection on first write. Ordered inserts stop at the first error; statements before it stay.',
    body: insertBodySchema,
    response: obj({ insertedCount: count, insertedIds: byIndex, writeErrors, retriedStmtIds, ok }, [
      'insertedCount',
      'insertedIds',
      ...WRITE_REQUIRED,
    ]),
  },
  {
    tag: 'crud',
    method: 'post',
    path: `${ns}/find`,
    summary: 'find; answers the first batch and a cursor id ("0" when exhausted)',
    description:
      'Targets the shards the filter can match (shard key equality: one shard; a range on the key prefix: the overlapping shards; else all), merges sorted results, then applies skip and limit. A missing database or collection answers an empty batch.',
    body: findBodySchema,
    response: ref('CursorResponse'),
  },
  {
    tag: 'cursors',
    method: 'post',
    path: '/v1/cursors/{id}/next',
    summary: 'getMore: the next batch',
    body: nextBodySchema,
    response: ref('CursorResponse'),
  },
  {
    tag: 'cursors',
    method: 'delete',
    path: '/v1/cursors/{id}',
    summary: 'killCursors',
    response: obj({ cursorsKilled: { type: 'array', items: { type: 'string' } }, ok }),
  },
  {
    tag: 'crud',
    method: 'post',
    path: `${ns}/update`,
    summary: 'update (updateOne / updateMany / replaceOne)',
    description:
      'On a sharded collection a multi:false update without the full shard key by equality in q updates one matching document (a write without shard key, as MongoDB 7.0+); an upsert needs the full shard key by equality in q (SHARD_KEY_NOT_FOUND otherwise).',
    body: updateBodySchema,
    response: obj(
      { matchedCount: count, modifiedCount: count, upsertedCount: count, upsertedIds: byIndex, writeErrors, retriedStmtIds, ok },
      ['matchedCount', 'modifiedCount', 'upsertedCount', 'upsertedIds', ...WRITE_REQUIRED],
    ),
  },
  {
    tag: 'crud',
    method: 'post',
    path: `${ns}/delete`,
    summary: 'delete (deleteOne / deleteMany)',
    description:
      'On a sharded collection a limit:1 delete without the full shard key by equality in q deletes one matching document (a write without shard key, as MongoDB 7.0+).',
    body: deleteBodySchema,
    response: obj({ deletedCount: count, writeErrors, retriedStmtIds, ok }, ['deletedCount', ...WRITE_REQUIRED]),
  },
  {
    tag: 'crud',
    method: 'post',
    path: '/v1/admin/renameCollection',
    summary: "renameCollection, as MongoDB's admin command: an unsharded collection takes a new name in its database",
    description:
      'The collection keeps its documents and indexes. With dropTarget, an existing collection of the new name is dropped in the same step; without it that is NamespaceExists (48). A sharded collection, a sharded target or another database is IllegalOperation (20); a missing source NamespaceNotFound (26).',
    body: renameCollectionBodySchema,
    response: obj({ ok }, ['ok']),
  },
  {
    tag: 'crud',
    method: 'post',
    path: '/v1/admin/bulkWrite',
    summary: "bulkWrite, as MongoDB 8.0's command: inserts, updates and deletes on several namespaces",
    description:
      'Each operation names its namespace by index in nsInfo: { insert: 0, document }, { update: 0, filter, updateMods, multi?, upsert? }, { delete: 0, filter, multi? }. Ordered (default) stops after the first failed operation. The cursor holds one result per operation run, by its index (idx): { ok: 1, n, nModified?, upserted? } or { ok: 0, code, codeName, errmsg }; with errorsOnly only the failed ones. Retryable with lsid and txnNumber (stmtId = the operation index); runs inside a transaction as its other commands do.',
    body: bulkWriteBodySchema,
    response: obj(
      {
        ok,
        nErrors: count,
        nInserted: count,
        nMatched: count,
        nModified: count,
        nUpserted: count,
        nDeleted: count,
        cursor: obj({
          id: { type: 'string', const: '0' },
          ns: { type: 'string' },
          firstBatch: { type: 'array', items: { type: 'object', additionalProperties: true } },
        }),
        retriedStmtIds,
      },
      ['ok', 'nErrors', 'nInserted', 'nMatched', 'nModified', 'nUpserted', 'nDeleted', 'cursor'],
    ),
  },
  {
    tag: 'crud',
    method: 'post',
    path: `${ns}/findAndModify`,
    summary: "findAndModify, as MongoDB's command",
    description:
      'On a sharded collection a query without the full shard key by equality changes the first matching document by sort (a write without shard key, as MongoDB 7.0+); an upsert needs the full shard key by equality.',
    body: findAndModifyBodySchema,
    response: obj({
      value: { description: 'The document before or after (new: true) the change, or null.' },
      lastErrorObject: obj({ n: count, updatedExisting: { type: 'boolean' }, upserted: {} }, ['n', 'updatedExisting']),
      ok,
    }),
  },
  {
    tag: 'crud',
    method: 'post',
    path: `${ns}/aggregate`,
    summary: 'aggregate; answers the first batch and a cursor id, as find (explain: true answers the plan)',
    description:
      "MongoDB's pipeline stages and accumulators (mingo's set, with find's $match and $sort semantics). The leading $match stages target shards as find's filter does; per-document stages, a partial $group, $sort with its $limit, and $limit run on each shard; the router merges and runs the rest. $lookup, $graphLookup and $unionWith run on the router; a $lookup by localField/foreignField reads only the documents an $in of its local values reaches, the others read their collection whole. A final $merge writes the results (whenMatched merge, replace, keepExisting or fail; whenNotMatched insert or discard); $out is refused.",
    body: aggregateBodySchema,
    response: ref('CursorResponse'),
  },
  { tag: 'crud', method: 'post', path: `${ns}/count`, summary: 'count', body: countBodySchema, response: obj({ n: count, ok }) },
  {
    tag: 'crud',
    method: 'post',
    path: `${ns}/distinct`,
    summary: 'distinct (values in MongoDB value order)',
    body: distinctBodySchema,
    response: obj({ values: { type: 'array', items: {} }, ok }),
  },
  {
    tag: 'indexes',
    method: 'post',
    path: `${ns}/indexes`,
    summary: 'createIndexes',
    description:
      'Builds the indexes on every shard (sharded collection) or the primary shard (unsharded); creating an existing index again changes nothing. unique needs the shard key as a prefix of the index key.',
    body: createIndexesBodySchema,
    response: obj({ numIndexesBefore: count, numIndexesAfter: count, createdCollectionAutomatically: { type: 'boolean' }, ok }, [
      'numIndexesBefore',
      'numIndexesAfter',
      'ok',
    ]),
  },
  {
    tag: 'indexes',
    method: 'get',
    path: `${ns}/indexes`,
    summary: 'listIndexes: _id_, the shard key index and the secondary indexes (404 NAMESPACE_NOT_FOUND for a missing collection)',
    response: obj({
      cursor: obj({
        id: { type: 'string', const: '0' },
        ns: { type: 'string' },
        firstBatch: {
          type: 'array',
          items: obj({ v: { type: 'integer' }, key: { type: 'object' }, name: { type: 'string' }, unique: { type: 'boolean' } }, [
            'v',
            'key',
            'name',
          ]),
        },
      }),
      ok,
    }),
  },
  {
    tag: 'indexes',
    method: 'delete',
    path: `${ns}/indexes/{name}`,
    summary: 'dropIndexes by name (_id_ and the shard key index cannot be dropped)',
    response: obj({ nIndexesWas: count, ok }),
  },
  {
    tag: 'documents',
    method: 'post',
    path: `${ns}/documents`,
    summary: 'Insert one document',
    body: documentSchema,
    response: obj({ insertedId: {}, ok }),
  },
  {
    tag: 'documents',
    method: 'get',
    path: `${ns}/documents/{id}`,
    summary: 'Read one document by _id (404 NOT_FOUND if none)',
    response: ref('Document'),
  },
  {
    tag: 'documents',
    method: 'put',
    path: `${ns}/documents/{id}`,
    summary: 'Replace one document by _id (404 if none)',
    body: documentSchema,
    response: obj({ matchedCount: count, modifiedCount: count, ok }),
  },
  {
    tag: 'documents',
    method: 'patch',
    path: `${ns}/documents/{id}`,
    summary: 'Update one document by _id: a body without $ operators is applied as { $set: body } (404 if none)',
    body: documentSchema,
    response: obj({ matchedCount: count, modifiedCount: count, ok }),
  },
  {
    tag: 'documents',
    method: 'delete',
    path: `${ns}/documents/{id}`,
    summary: 'Delete one document by _id (404 if none)',
    response: obj({ deletedCount: count, ok }),
  },
];

/** The JSON Schema (2020-12, OpenAPI 3.1's dialect) of a request body, as the edge validates it. */
function requestSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

const PATH_PARAMETERS: Record<string, { description: string; schema: JsonSchema }> = {
  db: { description: 'Database name: 1-63 characters, none of / \\ . space " $ * < > : | ?', schema: { type: 'string', maxLength: 63 } },
  coll: { description: 'Collection name: non-empty, no $, not starting with "system."', schema: { type: 'string' } },
  name: { description: 'The index name, as listIndexes shows it.', schema: { type: 'string' } },
  id: {
    description:
      'For documents: the _id; 24 hex digits are an ObjectId, an integer literal a number, anything else a string. For cursors: the cursor id.',
    schema: { type: 'string' },
  },
};

/** Builds the document. Long because it is the document's literal shape, written out once. */
export function buildOpenApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of [...OPERATIONS, ...SESSION_OPERATIONS]) {
    const parameters = [...operation.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({
      name,
      in: 'path',
      required: true,
      ...PATH_PARAMETERS[name!],
    }));
    const json =
      operation.path === '/v1/docs'
        ? { 'text/html': { schema: operation.response } }
        : { 'application/json': { schema: operation.response } };
    (paths[operation.path] ??= {})[operation.method] = {
      tags: [operation.tag],
      operationId: `${operation.method}${operation.path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
      summary: operation.summary,
      ...(operation.description ? { description: operation.description } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(operation.body
        ? {
            requestBody: {
              required: operation.method !== 'post' || !operation.path.startsWith('/v1/cursors'),
              content: { 'application/json': { schema: requestSchema(operation.body) } },
            },
          }
        : {}),
      responses: {
        [operation.method === 'post' && operation.path.endsWith('/documents') ? '201' : '200']: { description: 'Success', content: json },
        default: {
          description: 'An error: MongoDB shape with an HTTP status from the error code',
          content: { 'application/json': { schema: ref('ErrorResponse') } },
        },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tessera router API',
      version: '1',
      description:
        'The public REST API of a Tessera router (mongos). Request and response bodies are MongoDB Extended JSON (relaxed on output): ' +
        '{"$oid": "..."}, {"$date": "..."}, {"$numberLong": "..."}, ... Errors answer { ok: 0, code, codeName, errmsg, details } with an HTTP status for the code.',
    },
    tags: [
      { name: 'crud', description: 'Commands on a collection' },
      { name: 'cursors', description: 'Router cursors' },
      { name: 'documents', description: 'Single-document convenience routes' },
      { name: 'indexes', description: 'Secondary indexes' },
      { name: 'router', description: 'About this router' },
      { name: 'sessions', description: 'Logical sessions (lsid), which make writes retryable with a txnNumber' },
    ],
    paths,
    components: {
      schemas: {
        Document: { type: 'object', additionalProperties: true, description: 'A document in relaxed Extended JSON.' },
        WriteError: obj(
          {
            index: count,
            code: { type: 'integer' },
            codeName: { type: 'string' },
            errmsg: { type: 'string' },
            keyPattern: { type: 'object', description: 'DuplicateKey (11000): the key pattern of the index that refused the write.' },
            keyValue: { type: 'object', description: 'DuplicateKey (11000): the values that clashed, by field.' },
            details: { type: 'object' },
          },
          ['index', 'code', 'codeName', 'errmsg'],
        ),
        ErrorResponse: obj(
          {
            ok: { type: 'integer', const: 0 },
            code: { type: 'integer' },
            codeName: { type: 'string' },
            errmsg: { type: 'string' },
            keyPattern: { type: 'object', description: 'DuplicateKey (11000): the key pattern of the index that refused the write.' },
            keyValue: { type: 'object', description: 'DuplicateKey (11000): the values that clashed, by field.' },
            details: { type: 'object' },
          },
          ['ok', 'code', 'codeName', 'errmsg'],
        ),
        CursorResponse: obj({
          cursor: obj(
            {
              id: { type: 'string', pattern: '^\\d+$', description: '"0" when the cursor is exhausted.' },
              ns: { type: 'string' },
              firstBatch: { type: 'array', items: ref('Document') },
              nextBatch: { type: 'array', items: ref('Document') },
            },
            ['id', 'ns'],
          ),
          ok,
        }),
      },
    },
  };
}

/** Every operation as `METHOD /path/{param}`, for the coverage test. */
export function describedRoutes(): string[] {
  return [...OPERATIONS, ...SESSION_OPERATIONS].map((o) => `${o.method.toUpperCase()} ${o.path}`);
}
