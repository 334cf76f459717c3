import { describe, expect, it } from 'vitest';
import { jsonBytes } from './documents.ts';
import { scrambleId, seededRandom } from './keys.ts';
import { parseWorkloadOptions } from './options.ts';
import {
  CRUD_MIX,
  type CrudOperation,
  collectionSpecOf,
  crudRequest,
  insertBatch,
  judgeAnswer,
  pickCrudOperation,
  seedBatches,
} from './workloads.ts';

const env = { ADMIN_TOKEN: 'admin-token-0123456789', DOC_BYTES: '300', BATCH: '4', SEED_DOCS: '10' };

describe('workload requests', () => {
  it('shards each workload on its key, hashed ones pre-split into two chunks per shard', () => {
    expect(collectionSpecOf('insert-monotonic', 3)).toEqual({ key: { x: 1 } });
    expect(collectionSpecOf('insert-hashed', 3)).toEqual({ key: { x: 'hashed' }, numInitialChunks: 6 });
    expect(collectionSpecOf('crud-mix', 3)).toEqual({ key: { k: 1 } });
  });

  it('builds insert batches of DOC_BYTES documents with ids unique across iterations', () => {
    const options = parseWorkloadOptions('insert-monotonic', env);
    const first = insertBatch('insert-monotonic', options, 0, seededRandom(1));
    const second = insertBatch('insert-monotonic', options, 1, seededRandom(1));
    expect(first.path).toBe('/v1/load/insert_monotonic/insert');
    const docs = [
      ...(first.body as { documents: Array<{ _id: number; x: number }> }).documents,
      ...(second.body as { documents: Array<{ _id: number; x: number }> }).documents,
    ];
    expect(docs.map((d) => d._id)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(docs.map((d) => d.x)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(docs.every((d) => jsonBytes(d) === 300)).toBe(true);
  });

  it('gives random-key inserts random shard keys but still unique ids', () => {
    const options = parseWorkloadOptions('insert-random', env);
    const docs = (insertBatch('insert-random', options, 5, seededRandom(9)).body as { documents: Array<{ _id: number; x: number }> })
      .documents;
    expect(docs.map((d) => d._id)).toEqual([20, 21, 22, 23]);
    expect(new Set(docs.map((d) => d.x)).size).toBe(4);
  });

  it('keeps to the documented mix of operations', () => {
    const random = seededRandom(3);
    const counts: Record<CrudOperation, number> = { read: 0, update: 0, insert: 0, scatter: 0 };
    for (let i = 0; i < 100_000; i++) counts[pickCrudOperation(random)]++;
    for (const operation of Object.keys(CRUD_MIX) as CrudOperation[]) expect(counts[operation] / 1000).toBeCloseTo(CRUD_MIX[operation], 0);
  });

  it('targets seed documents by full shard key, and seeds them in batches', () => {
    const options = parseWorkloadOptions('crud-mix', env);
    const read = crudRequest('read', options, 0, () => 0.35);
    expect(read).toMatchObject({ name: 'read', path: '/v1/load/crud_mix/find', body: { filter: { k: scrambleId(3), _id: 3 }, limit: 1 } });
    expect(crudRequest('update', options, 0, () => 0.35).body).toEqual({
      updates: [{ q: { k: scrambleId(3), _id: 3 }, u: { $inc: { v: 1 } } }],
    });
    expect((crudRequest('insert', options, 42, () => 0).body as { documents: Array<{ _id: number }> }).documents[0]?._id).toBe(52);
    expect((crudRequest('scatter', options, 0, () => 0.5).body as { filter: unknown }).filter).toEqual({ g: 50 });
    const seeds = seedBatches(options);
    expect(seeds.map((r) => (r.body as { documents: unknown[] }).documents.length)).toEqual([4, 4, 2]);
  });

  it('judges answers: status, write errors, counts and found documents', () => {
    const options = parseWorkloadOptions('crud-mix', env);
    const insert = crudRequest('insert', options, 0, () => 0);
    expect(judgeAnswer(insert, 200, { insertedCount: 1, writeErrors: [] })).toEqual({ ok: true, inserted: 1 });
    expect(judgeAnswer(insert, 200, { insertedCount: 0, writeErrors: [{ codeName: 'DuplicateKey' }] })).toMatchObject({
      ok: false,
      problem: 'writeError DuplicateKey',
    });
    expect(judgeAnswer(insert, 503, { ok: 0, codeName: 'StaleConfig' })).toMatchObject({ ok: false, problem: 'HTTP 503 StaleConfig' });
    const read = crudRequest('read', options, 0, () => 0);
    expect(judgeAnswer(read, 200, { cursor: { id: '0', firstBatch: [{}] } }).ok).toBe(true);
    expect(judgeAnswer(read, 200, { cursor: { id: '0', firstBatch: [] } })).toMatchObject({ ok: false, problem: 'document not found' });
    expect(
      judgeAnswer(
        crudRequest('update', options, 0, () => 0),
        200,
        { matchedCount: 1, modifiedCount: 1 },
      ).ok,
    ).toBe(true);
    expect(
      judgeAnswer(
        crudRequest('scatter', options, 0, () => 0),
        200,
        'oops',
      ).ok,
    ).toBe(false);
  });
});
