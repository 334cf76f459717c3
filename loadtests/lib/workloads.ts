// One iteration of each workload as data: which router request to send, and how to judge its
// answer. The k6 scripts send these with k6/http; the end-to-end test with fetch.

import { buildDocument } from './documents.ts';
import { type RandomSource, SHARD_KEYS, monotonicKeys, randomKeys, scrambleId } from './keys.ts';
import type { CollectionSpec } from './steps.ts';
import type { WorkloadName, WorkloadOptions } from './options.ts';

export interface RouterRequest {
  /** Tag for latency metrics: insert, read, update, scatter. */
  name: 'insert' | 'read' | 'update' | 'scatter';
  method: 'POST';
  path: string;
  body: unknown;
}

export type InsertWorkload = 'insert-monotonic' | 'insert-hashed' | 'insert-random' | 'add-shard-under-load' | 'subscriptions';

/** How each workload shards its collection. */
export function collectionSpecOf(workload: WorkloadName, shardCount: number): CollectionSpec {
  switch (workload) {
    case 'insert-monotonic':
      return { key: SHARD_KEYS.monotonic };
    case 'insert-hashed':
      return { key: SHARD_KEYS.hashed, numInitialChunks: Math.max(2, 2 * shardCount) };
    case 'insert-random':
    case 'add-shard-under-load':
    case 'subscriptions':
      return { key: SHARD_KEYS.random };
    case 'crud-mix':
      return { key: SHARD_KEYS.crud };
    case 'retryable-writes':
      return { key: SHARD_KEYS.retryable, numInitialChunks: Math.max(2, 2 * shardCount) };
    case 'transactions':
      return { key: SHARD_KEYS.accounts, numInitialChunks: Math.max(2, 2 * shardCount) };
    case 'router-roll':
      return { key: SHARD_KEYS.roll, numInitialChunks: Math.max(2, 2 * shardCount) };
  }
}

/** A router command's path for `ns`: `/v1/<db>/<collection>/<command>`. */
export function pathOf(ns: string, command: string): string {
  const dot = ns.indexOf('.');
  return `/v1/${encodeURIComponent(ns.slice(0, dot))}/${encodeURIComponent(ns.slice(dot + 1))}/${command}`;
}

/**
 * The insert batch of iteration `iterationInTest` (unique across VUs). `_id` is derived from the
 * iteration so it is unique in the run whatever the key; `x` is the shard key value.
 */
export function insertBatch(
  workload: InsertWorkload,
  options: WorkloadOptions,
  iterationInTest: number,
  random: RandomSource,
): RouterRequest {
  const ids = monotonicKeys(iterationInTest, options.batch);
  const keys = workload === 'insert-monotonic' || workload === 'insert-hashed' ? ids : randomKeys(random, options.batch);
  const documents = ids.map((id, i) => buildDocument({ _id: id, x: keys[i] as number }, options.docBytes, id));
  return { name: 'insert', method: 'POST', path: pathOf(options.ns, 'insert'), body: { documents, ordered: false } };
}

/** crud-mix documents: `_id` = id, shard key `k` = scrambleId(id), `g` a group for scatter-gather finds. */
export const CRUD_GROUPS = 100;

export function crudDocument(id: number, docBytes: number, version = 0): Record<string, string | number | boolean> {
  return buildDocument({ _id: id, k: scrambleId(id), g: id % CRUD_GROUPS, v: version }, docBytes, id);
}

/** The seed documents of crud-mix, in insert requests of `batch` documents (setup sends these). */
export function seedBatches(options: WorkloadOptions): RouterRequest[] {
  const requests: RouterRequest[] = [];
  for (let start = 0; start < options.seedDocs; start += options.batch) {
    const documents = [];
    for (let id = start; id < Math.min(options.seedDocs, start + options.batch); id++) documents.push(crudDocument(id, options.docBytes));
    requests.push({ name: 'insert', method: 'POST', path: pathOf(options.ns, 'insert'), body: { documents, ordered: false } });
  }
  return requests;
}

/** The mix, in percent: 69 reads by key, 20 updates by key, 10 inserts, 1 scatter-gather find. */
export const CRUD_MIX = { read: 69, update: 20, insert: 10, scatter: 1 } as const;

export type CrudOperation = keyof typeof CRUD_MIX;

export function pickCrudOperation(random: RandomSource): CrudOperation {
  let roll = random() * 100;
  for (const operation of ['read', 'update', 'insert', 'scatter'] as const) {
    roll -= CRUD_MIX[operation];
    if (roll < 0) return operation;
  }
  return 'scatter';
}

/**
 * One crud-mix request. Reads and updates target a seed document by its full shard key, so the
 * router sends them to one shard; inserts add documents after the seed (ids from the iteration);
 * the scatter-gather find filters on the group, which is not the shard key, so it goes to every shard.
 */
export function crudRequest(
  operation: CrudOperation,
  options: WorkloadOptions,
  iterationInTest: number,
  random: RandomSource,
): RouterRequest {
  const seedId = Math.floor(random() * options.seedDocs);
  switch (operation) {
    case 'read':
      return {
        name: 'read',
        method: 'POST',
        path: pathOf(options.ns, 'find'),
        body: { filter: { k: scrambleId(seedId), _id: seedId }, limit: 1 },
      };
    case 'update':
      return {
        name: 'update',
        method: 'POST',
        path: pathOf(options.ns, 'update'),
        body: { updates: [{ q: { k: scrambleId(seedId), _id: seedId }, u: { $inc: { v: 1 } } }] },
      };
    case 'insert': {
      const id = options.seedDocs + iterationInTest;
      return {
        name: 'insert',
        method: 'POST',
        path: pathOf(options.ns, 'insert'),
        body: { documents: [crudDocument(id, options.docBytes)] },
      };
    }
    case 'scatter':
      return {
        name: 'scatter',
        method: 'POST',
        path: pathOf(options.ns, 'find'),
        body: { filter: { g: Math.floor(random() * CRUD_GROUPS) }, projection: { pad: 0 }, limit: 20 },
      };
  }
}

export interface Verdict {
  ok: boolean;
  /** What went wrong, for the error counter's tag and the log. */
  problem?: string;
  /** Documents the request inserted (inserts only). */
  inserted?: number;
}

/**
 * Judges a router answer: HTTP 200 and no write errors; a read by key must find its document.
 * MongoDB's error shape `{ ok: 0, codeName }` names the problem.
 */
export function judgeAnswer(request: RouterRequest, status: number, body: unknown): Verdict {
  const answer = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  if (status !== 200) return { ok: false, problem: `HTTP ${status} ${typeof answer.codeName === 'string' ? answer.codeName : ''}`.trim() };
  const writeErrors = answer.writeErrors;
  if (Array.isArray(writeErrors) && writeErrors.length > 0) {
    const first = writeErrors[0] as { codeName?: string; errmsg?: string };
    return { ok: false, problem: `writeError ${first.codeName ?? first.errmsg ?? ''}`.trim() };
  }
  switch (request.name) {
    case 'insert': {
      const expected = (request.body as { documents: unknown[] }).documents.length;
      const inserted = typeof answer.insertedCount === 'number' ? answer.insertedCount : 0;
      return inserted === expected ? { ok: true, inserted } : { ok: false, problem: `inserted ${inserted} of ${expected}`, inserted };
    }
    case 'read': {
      const batch = (answer.cursor as { firstBatch?: unknown[] } | undefined)?.firstBatch;
      return Array.isArray(batch) && batch.length === 1 ? { ok: true } : { ok: false, problem: 'document not found' };
    }
    case 'update':
      return answer.matchedCount === 1 ? { ok: true } : { ok: false, problem: `matched ${String(answer.matchedCount)}` };
    case 'scatter':
      return Array.isArray((answer.cursor as { firstBatch?: unknown[] } | undefined)?.firstBatch)
        ? { ok: true }
        : { ok: false, problem: 'no cursor' };
  }
}
