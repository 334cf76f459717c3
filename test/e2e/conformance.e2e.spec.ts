import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, spreadChunks, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * The query language's conformance across layouts, on real processes: each case seeds the same
 * documents into an unsharded collection, one hashed on `_id` and one ranged on `k` with a chunk
 * on each of three shards, runs the same command on each, and checks that the sharded answers
 * and the documents left are the unsharded ones. Every case must also do something on the
 * unsharded collection (answer documents, or change some), so none passes by doing nothing.
 * Aggregation stages have their own table in aggregate.e2e.spec.ts.
 */

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

const LAYOUTS = ['plain', 'hashed', 'ranged'] as const;
type Body = Record<string, unknown>;

/** A case: the command's route under the collection (or bulkWrite), its body for case id `c` and namespace `ns`. */
interface Case {
  readonly route: 'find' | 'count' | 'distinct' | 'aggregate' | 'update' | 'delete' | 'findAndModify' | 'bulkWrite';
  readonly body: (c: string, ns: string) => Body;
}

/** Twelve documents per case; `k` spreads them over the ranged collection's three chunks. */
function seed(c: string): Body[] {
  return Array.from({ length: 12 }, (_, i) => ({
    _id: `${c}-${String(i).padStart(2, '0')}`,
    case: c,
    k: i * 25,
    n: i,
    name: ['Ann', 'bob', 'Cy', 'ann'][i % 4],
    tags: ['a', 'b', 'c'].slice(0, i % 4),
    grades: [
      { s: i, t: 'x' },
      { s: i + 5, t: 'y' },
    ],
    nested: { v: i % 3 },
    ...(i % 5 === 0 ? {} : { opt: i }),
  }));
}

const STRENGTH_2 = { locale: 'en', strength: 2 };
const update = (c: string, statement: Body, extra: Body = {}) => ({
  updates: [{ ...statement, q: { case: c, ...(statement['q'] as Body) } }],
  ...extra,
});

const CASES: Record<string, Case> = {
  'comparison operators': { route: 'find', body: (c) => ({ filter: { case: c, n: { $gte: 3, $lt: 9 }, name: { $ne: 'bob' } } }) },
  '$in and $nin': { route: 'find', body: (c) => ({ filter: { case: c, name: { $in: ['Ann', 'Cy'] }, n: { $nin: [0, 4] } } }) },
  '$or, $nor and $not': {
    route: 'find',
    body: (c) => ({ filter: { case: c, $or: [{ n: 1 }, { n: { $gt: 6 } }], $nor: [{ name: 'Cy' }], n: { $not: { $eq: 11 } } } }),
  },
  '$exists and $type': { route: 'find', body: (c) => ({ filter: { case: c, 'nested.v': { $type: 'number' }, opt: { $exists: false } } }) },
  '$regex with options': { route: 'find', body: (c) => ({ filter: { case: c, name: { $regex: '^a', $options: 'i' } } }) },
  '$elemMatch and $size': {
    route: 'find',
    body: (c) => ({ filter: { case: c, grades: { $elemMatch: { s: { $gt: 8 }, t: 'y' } }, tags: { $size: 2 } } }),
  },
  '$all and dotted paths into arrays': { route: 'find', body: (c) => ({ filter: { case: c, tags: { $all: ['a', 'b'] }, 'grades.s': 7 } }) },
  '$expr reading let': { route: 'find', body: (c) => ({ filter: { case: c, $expr: { $gt: ['$n', '$$min'] } }, let: { min: 7 } }) },
  'an inclusion projection with a sort, skip and limit': {
    route: 'find',
    body: (c) => ({ filter: { case: c }, projection: { name: 1, 'nested.v': 1 }, sort: { name: 1, n: -1 }, skip: 2, limit: 5 }),
  },
  'projection operators: $slice, $elemMatch and computed fields': {
    route: 'find',
    body: (c) => ({
      filter: { case: c, n: { $lt: 6 } },
      projection: { tags: { $slice: -1 }, grades: { $elemMatch: { s: { $gte: 7 } } }, twice: { $multiply: ['$n', '$$two'] } },
      let: { two: 2 },
    }),
  },
  'the positional $ in a projection': {
    route: 'find',
    body: (c) => ({ filter: { case: c, 'grades.s': { $gte: 9 } }, projection: { name: 1, 'grades.$': 1 }, sort: { n: 1 } }),
  },
  'an exclusion projection': { route: 'find', body: (c) => ({ filter: { case: c, n: { $lt: 3 } }, projection: { grades: 0, tags: 0 } }) },
  'find under a collation, sorted by it': {
    route: 'find',
    body: (c) => ({ filter: { case: c, name: 'ANN' }, sort: { name: 1, _id: 1 }, collation: STRENGTH_2 }),
  },
  'find with a hint': { route: 'find', body: (c) => ({ filter: { case: c, n: { $gt: 9 } }, hint: { _id: 1 } }) },
  'count with skip, limit and a collation': {
    route: 'count',
    body: (c) => ({ filter: { case: c, name: 'ann' }, skip: 1, limit: 4, collation: STRENGTH_2 }),
  },
  'distinct of an array field': { route: 'distinct', body: (c) => ({ key: 'tags', filter: { case: c } }) },
  'distinct under a collation': {
    route: 'distinct',
    body: (c) => ({ key: 'name', filter: { case: c }, collation: { locale: 'en', strength: 1 } }),
  },
  'aggregate $group and $sortByCount under a collation': {
    route: 'aggregate',
    body: (c) => ({
      pipeline: [
        { $match: { case: c } },
        {
          $facet: {
            byName: [{ $group: { _id: '$name', n: { $sum: '$n' } } }, { $sort: { _id: 1 } }],
            counts: [{ $sortByCount: '$name' }, { $sort: { count: -1, _id: 1 } }],
          },
        },
      ],
      collation: STRENGTH_2,
    }),
  },
  'aggregate $group with let': {
    route: 'aggregate',
    body: (c) => ({
      pipeline: [
        { $match: { case: c } },
        { $group: { _id: '$nested.v', total: { $sum: { $multiply: ['$n', '$$factor'] } } } },
        { $sort: { _id: 1 } },
      ],
      let: { factor: 2 },
    }),
  },

  '$set and $unset on many': {
    route: 'update',
    body: (c) => update(c, { q: { n: { $lt: 4 } }, u: { $set: { 'nested.w': 1 }, $unset: { tags: '' } }, multi: true }),
  },
  '$inc, $mul, $min and $max': {
    route: 'update',
    body: (c) => update(c, { q: {}, u: { $inc: { n: 2 }, $mul: { 'nested.v': 3 }, $min: { opt: 3 }, $max: { score: 5 } }, multi: true }),
  },
  $rename: { route: 'update', body: (c) => update(c, { q: { n: { $gte: 6 } }, u: { $rename: { name: 'who' } }, multi: true }) },
  '$push with $each, $position, $slice and $sort': {
    route: 'update',
    body: (c) =>
      update(c, {
        q: {},
        u: { $push: { tags: { $each: ['z', 'y'], $position: 0, $slice: 3 }, grades: { $each: [{ s: 0, t: 'new' }], $sort: { s: -1 } } } },
        multi: true,
      }),
  },
  '$addToSet, $pull and $pop': {
    route: 'update',
    body: (c) => ({
      updates: [
        { q: { case: c, n: { $lt: 6 } }, u: { $addToSet: { tags: { $each: ['a', 'q'] } } }, multi: true },
        { q: { case: c }, u: { $pull: { grades: { s: { $gt: 10 } } } }, multi: true },
        { q: { case: c, n: { $gte: 8 } }, u: { $pop: { tags: -1 } }, multi: true },
      ],
    }),
  },
  'an upsert with $setOnInsert and $currentDate': {
    route: 'update',
    body: (c) => ({
      updates: [
        { q: { _id: `${c}-new`, k: 150, case: c }, u: { $setOnInsert: { created: true }, $currentDate: { at: true } }, upsert: true },
        { q: { _id: `${c}-01`, k: 25, case: c }, u: { $setOnInsert: { created: true }, $set: { seen: 1 } }, upsert: true },
      ],
    }),
  },
  'a replacement of one document': { route: 'update', body: (c) => update(c, { q: { n: 3 }, u: { case: c, k: 75, replaced: true } }) },
  'an update pipeline on many': {
    route: 'update',
    body: (c) =>
      update(c, { q: { n: { $gt: 5 } }, u: [{ $set: { sum: { $add: ['$n', '$nested.v'] } } }, { $unset: 'grades' }], multi: true }),
  },
  arrayFilters: {
    route: 'update',
    body: (c) => update(c, { q: {}, u: { $set: { 'grades.$[g].t': 'hi' } }, arrayFilters: [{ 'g.s': { $gte: 8 } }], multi: true }),
  },
  'the positional $': {
    route: 'update',
    body: (c) => update(c, { q: { 'grades.s': 7 }, u: { $set: { 'grades.$.t': 'pos' } }, multi: true }),
  },
  'a single update without the shard key': { route: 'update', body: (c) => update(c, { q: { n: 5 }, u: { $inc: { n: 100 } } }) },
  'an update under a collation': {
    route: 'update',
    body: (c) => update(c, { q: { name: 'ANN' }, u: { $set: { ci: true } }, multi: true, collation: STRENGTH_2 }),
  },
  'an update reading let and constants': {
    route: 'update',
    body: (c) =>
      update(
        c,
        { q: { $expr: { $eq: ['$n', '$$target'] } }, u: [{ $set: { hit: '$$mark', extra: '$$plus' } }], c: { plus: 1 } },
        { let: { target: 6, mark: 'm' } },
      ),
  },
  'an unordered batch with a failing statement': {
    route: 'update',
    body: (c) => ({
      updates: [
        { q: { case: c, n: 1 }, u: { $set: { first: 1 } } },
        { q: { case: c, n: 2 }, u: { $inc: { name: 1 } } },
        { q: { case: c, n: 3 }, u: { $set: { third: 1 } } },
      ],
      ordered: false,
    }),
  },
  'an ordered batch stopping at its failing statement': {
    route: 'update',
    body: (c) => ({
      updates: [
        { q: { case: c, n: 1 }, u: { $set: { first: 1 } } },
        { q: { case: c, n: 2 }, u: { $set: { 'grades.$.t': 1 } } },
        { q: { case: c, n: 3 }, u: { $set: { third: 1 } } },
      ],
    }),
  },
  'deletes of one and of many': {
    route: 'delete',
    body: (c) => ({
      deletes: [
        { q: { case: c, n: { $gte: 9 } }, limit: 0 },
        { q: { case: c, n: 4 }, limit: 1 },
        { q: { case: c, name: 'BOB' }, limit: 0, collation: STRENGTH_2 },
      ],
    }),
  },
  'findAndModify by sort, returning the new document projected': {
    route: 'findAndModify',
    body: (c) => ({ query: { case: c, name: 'ann' }, sort: { n: -1 }, update: { $inc: { n: 50 } }, new: true, fields: { n: 1, name: 1 } }),
  },
  'findAndModify removing the first by sort': {
    route: 'findAndModify',
    body: (c) => ({ query: { case: c, n: { $gt: 2 } }, sort: { k: 1 }, remove: true }),
  },
  'findAndModify upserting': {
    route: 'findAndModify',
    body: (c) => ({ query: { _id: `${c}-up`, k: 260, case: c }, update: { $set: { made: true } }, upsert: true, new: true }),
  },
  'findAndModify with arrayFilters and a collation': {
    route: 'findAndModify',
    body: (c) => ({
      query: { case: c, name: 'CY' },
      sort: { n: 1 },
      update: { $set: { 'grades.$[g].t': 'fm' } },
      arrayFilters: [{ 'g.t': 'y' }],
      collation: STRENGTH_2,
    }),
  },
  'bulkWrite, ordered, with every operation': {
    route: 'bulkWrite',
    body: (c, ns) => ({
      ops: [
        { insert: 0, document: { _id: `${c}-bulk`, case: c, k: 130, n: 99 } },
        { update: 0, filter: { case: c, n: { $lt: 3 } }, updateMods: { $set: { bulk: 1 } }, multi: true },
        { update: 0, filter: { case: c, name: 'CY' }, updateMods: [{ $set: { l: '$$v' } }], multi: true, collation: STRENGTH_2 },
        { delete: 0, filter: { case: c, n: 11 } },
        { update: 0, filter: { case: c, n: 4 }, updateMods: { $inc: { name: 1 } } },
        { delete: 0, filter: { case: c }, multi: true },
      ],
      nsInfo: [{ ns }],
      let: { v: 'let' },
    }),
  },
};

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 3, routers: 1, env: FAST_CONFIG_ENV }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
  await config.shardCollection({ ns: 'conf.hashed', key: { _id: 'hashed' } });
  await config.shardCollection({ ns: 'conf.ranged', key: { k: 1 } });
  await spreadChunks(config, 'conf.ranged', [100, 200]);
  for (const layout of ['hashed', 'ranged']) {
    const { chunks } = await config.getChunks({ ns: `conf.${layout}` });
    expect(new Set(chunks.map((chunk) => chunk.shard)).size).toBe(3);
  }
});

afterAll(async () => {
  await dispose?.();
  await api?.close();
});

/** What is compared: errors by code, cursors by their documents (unordered without a sort), no clock. */
function normalized(status: number, json: Body, ordered: boolean): unknown {
  if (status !== 200) return { status, code: json['code'] };
  const { retriedStmtIds: _retried, $clusterTime: _time, operationTime: _op, cursor, writeErrors, ...rest } = json;
  const out: Body = { ...rest };
  if (Array.isArray(writeErrors)) out['writeErrors'] = writeErrors.map((e: Body) => ({ index: e['index'], code: e['code'] }));
  if (cursor !== undefined) {
    const batch = ((cursor as Body)['firstBatch'] ?? []) as unknown[];
    out['documents'] = ordered ? batch : batch.map((d) => JSON.stringify(d)).sort();
  }
  return out;
}

/** A document as compared: `$currentDate`'s time is the clock's, so only its presence counts. */
const withoutTimes = (documents: unknown[]) => documents.map((d) => ({ ...(d as Body), ...('at' in (d as Body) ? { at: 'a date' } : {}) }));

async function run(route: Case['route'], body: Body, layout: string): Promise<{ status: number; json: Body }> {
  if (route === 'bulkWrite') return api.call('POST', '/v1/admin/bulkWrite', body);
  const batchSize =
    route === 'find' || route === 'aggregate'
      ? { [route === 'find' ? 'batchSize' : 'cursor']: route === 'find' ? 1000 : { batchSize: 1000 } }
      : {};
  return api.call('POST', `/v1/conf/${layout}/${route}`, { ...body, ...batchSize });
}

describe('the same answers unsharded, hashed and ranged', () => {
  it.each(Object.entries(CASES).map(([name, c], i) => [name, c, `c${String(i).padStart(2, '0')}`] as const))(
    '%s',
    async (_name, spec, c) => {
      const answers: unknown[] = [];
      for (const layout of LAYOUTS) {
        const ns = `conf.${layout}`;
        expect((await api.call('POST', `/v1/conf/${layout}/insert`, { documents: seed(c) })).json).toMatchObject({ insertedCount: 12 });
        const body = spec.body(c, ns);
        const { status, json } = await run(spec.route, body, layout);
        const ordered = body['sort'] !== undefined || spec.route === 'aggregate';
        const documents = withoutTimes(await api.findAll(ns, { filter: { case: c }, sort: { _id: 1 } }));
        answers.push({ answer: normalized(status, json, ordered), documents });
        if (layout === 'plain') {
          const changed = JSON.stringify(documents) !== JSON.stringify(seed(c));
          const answered =
            ((json['cursor'] as Body | undefined)?.['firstBatch'] as unknown[] | undefined)?.length ??
            (json['n'] as number | undefined) ??
            (json['values'] as unknown[] | undefined)?.length ??
            0;
          expect(status, JSON.stringify(json)).toBe(200);
          expect(changed || answered > 0, `the case does nothing: ${JSON.stringify(json)}`).toBe(true);
        }
      }
      expect(answers[1], 'hashed').toEqual(answers[0]);
      expect(answers[2], 'ranged').toEqual(answers[0]);
    },
  );
});
