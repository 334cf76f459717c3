import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { encodeKey, parseShardKeyPattern } from '@tessera/core';
import type { DataSizeResult } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { DocumentStore } from '../documents/document-store.js';
import { ChunkSizingService } from './chunk-sizing.service.js';
import { SplitVectorService } from './split-vector.service.js';
import { copyRangeOut, copyRowsIn } from '../migration/copy-transfer.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';

let db: TestDatabase;
let sizing: ChunkSizingService;
let splitter: SplitVectorService;
let storage: CollectionStorageService;

beforeAll(async () => {
  db = await createTestDatabase('shard');
  storage = new CollectionStorageService(db.dataSource);
  sizing = new ChunkSizingService(db.dataSource, storage);
  splitter = new SplitVectorService(db.dataSource, storage);
});
afterAll(async () => db?.drop());

const MIN = [{ $minKey: 1 }];
const MAX = [{ $maxKey: 1 }];

/** A collection sharded on { x: 1 } holding `xs` as documents of about `pad` bytes each. */
async function collection(xs: number[], pad = 100): Promise<string> {
  const uuid = randomUUID();
  const ns = `db.c${uuid.slice(0, 8)}`;
  await storage.createCollection(uuid, { ns, keyPattern: { x: 1 } });
  const handle = { ns, table: tableName(uuid), pattern: parseShardKeyPattern({ x: 1 }), owns: () => true, writeTime: writeTimeNow() };
  await new DocumentStore(db.dataSource).insert(
    handle,
    xs.map((x, i) => ({ _id: i, x, pad: 'p'.repeat(pad) })),
    { ordered: true, generateId: () => new ObjectId() },
  );
  return ns;
}

/**
 * Waits until Postgres' statistics count the `rows` inserted into `ns`: a backend reports its
 * writes up to seconds after they commit, and a report that lands after an ANALYZE counts them
 * again as changed since it (so the planner-based estimate would be 2,000 + 5,000 for 2,000).
 */
async function statisticsCaughtUp(ns: string, rows: number): Promise<void> {
  const table = tableName((await storage.localCollection(ns))!.uuid);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const [{ n }] = (await db.dataSource.query(
      `SELECT coalesce((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = $1::regclass), 0) AS n`,
      [table],
    )) as [{ n: string }];
    if (Number(n) >= rows) return;
    if (Date.now() > deadline) throw new Error(`the statistics of ${table} still count ${n} inserted rows of ${rows}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('dataSize', () => {
  it('sums the stored sizes and counts the documents of a range, or of the whole collection', async () => {
    const ns = await collection([1, 2, 3, 4, 5]);
    const all = await sizing.dataSize({ ns });
    expect(all.numObjects).toBe(5);
    expect(all.size).toBeGreaterThan(5 * 100);
    expect(await sizing.dataSize({ ns, range: { min: [2], max: [4] } })).toMatchObject({ numObjects: 2 });
  });

  it('answers zero for a collection this shard does not store', async () => {
    expect(await sizing.dataSize({ ns: 'db.absent' })).toEqual({ size: 0, numObjects: 0 });
  });
});

describe('statsForBalancing', () => {
  it('leaves out ready range deletions and ranges being received, not a range being given away', async () => {
    const ns = await collection(Array.from({ length: 10 }, (_, i) => i));
    const uuid = (await storage.localCollection(ns))!.uuid;
    const whole = (await sizing.dataSize({ ns })).size;
    const [owned] = (await sizing.statsForBalancing({ namespaces: [ns] })).stats;
    expect(owned).toEqual({ ns, collSize: whole });

    const task = async (min: number, max: number, pending: boolean): Promise<string> => {
      const id = randomUUID();
      await db.dataSource.query(
        `INSERT INTO range_deletions (id, ns, collection_uuid, min, max, min_ejson, max_ejson, pending) VALUES ($1, $2, $3, $4, $5, '', '', $6)`,
        [id, ns, uuid, Buffer.from(encodeKey([min])), Buffer.from(encodeKey([max])), pending],
      );
      return id;
    };
    // A range being received: its pending task belongs to a migration this shard receives.
    const receiving = await task(2, 4, true);
    await db.dataSource.query(
      `INSERT INTO migration_recipients (id, ns, collection_uuid, min, max, donor, donor_url) VALUES ($1, $2, $3, $4, $5, 'a', 'http://a')`,
      [receiving, ns, uuid, Buffer.from(encodeKey([2])), Buffer.from(encodeKey([4]))],
    );
    await task(7, 100, false); // a range given away, not cleaned yet
    await task(4, 6, true); // a range being given away: still owned until its migration commits
    const orphans =
      (await sizing.dataSize({ ns, range: { min: [2], max: [4] } })).size +
      (await sizing.dataSize({ ns, range: { min: [7], max: [100] } })).size;
    expect((await sizing.statsForBalancing({ namespaces: [ns, 'db.absent'] })).stats).toEqual([
      { ns, collSize: whole - orphans },
      { ns: 'db.absent', collSize: 0 },
    ]);
  });
  it('takes a document in two overlapping orphan ranges out once', async () => {
    const ns = await collection(Array.from({ length: 10 }, (_, i) => i));
    const uuid = (await storage.localCollection(ns))!.uuid;
    for (const [min, max] of [
      [4, 8],
      [2, 6],
      [8, 9],
    ] as const) {
      await db.dataSource.query(
        `INSERT INTO range_deletions (id, ns, collection_uuid, min, max, min_ejson, max_ejson, pending) VALUES ($1, $2, $3, $4, $5, '', '', false)`,
        [randomUUID(), ns, uuid, Buffer.from(encodeKey([min])), Buffer.from(encodeKey([max]))],
      );
    }
    const whole = (await sizing.dataSize({ ns })).size;
    const orphans = (await sizing.dataSize({ ns, range: { min: [2], max: [9] } })).size;
    expect((await sizing.statsForBalancing({ namespaces: [ns] })).stats).toEqual([{ ns, collSize: whole - orphans }]);
  });
  it("sums a ready range's orphans once, then follows the range deleter's count", async () => {
    // Twenty documents of one size (two-digit keys), the upper ten given away and not cleaned yet.
    const ns = await collection(Array.from({ length: 20 }, (_, i) => 10 + i));
    const uuid = (await storage.localCollection(ns))!.uuid;
    const id = randomUUID();
    const [min, max] = [Buffer.from(encodeKey([20])), Buffer.from(encodeKey([30]))];
    await db.dataSource.query(
      `INSERT INTO range_deletions (id, ns, collection_uuid, min, max, min_ejson, max_ejson, pending) VALUES ($1, $2, $3, $4, $5, '', '', false)`,
      [id, ns, uuid, min, max],
    );
    const one = (await sizing.dataSize({ ns })).size / 20;
    expect((await sizing.statsForBalancing({ namespaces: [ns] })).stats).toEqual([{ ns, collSize: 10 * one }]);
    // The range deleter deletes four of them and counts them in the task, in one transaction.
    await db.dataSource.transaction(async (manager) => {
      await manager.query("SELECT set_config('tessera.write_time', '0', true), set_config('tessera.keep_history', 'off', true)");
      await manager.query(`DELETE FROM ${tableName(uuid)} WHERE shard_key >= $1 AND shard_key < $2 AND shard_key < $3`, [
        min,
        max,
        Buffer.from(encodeKey([24])),
      ]);
      await manager.query('UPDATE range_deletions SET deleted_documents = deleted_documents + 4 WHERE id = $1', [id]);
    });
    const query = vi.spyOn(db.dataSource, 'query');
    try {
      expect((await sizing.statsForBalancing({ namespaces: [ns] })).stats).toEqual([{ ns, collSize: 10 * one }]);
      expect(query.mock.calls.filter(([sql]) => String(sql).includes('shard_key >='))).toEqual([]);
    } finally {
      query.mockRestore();
    }
  });
});

describe('statsForBalancing from the totals the writes keep', () => {
  /** What the shard stores of `ns`, read from the table itself, against the totals (folded by a statsForBalancing). */
  async function storedAndKept(ns: string): Promise<{ stored: DataSizeResult; kept: DataSizeResult }> {
    const uuid = (await storage.localCollection(ns))!.uuid;
    const [collSize] = (await sizing.statsForBalancing({ namespaces: [ns] })).stats;
    const [kept] = (await db.dataSource.query('SELECT bytes, documents FROM collection_sizes WHERE collection_uuid = $1', [uuid])) as [
      { bytes: string; documents: string },
    ];
    expect(collSize!.collSize).toBe(Number(kept.bytes));
    return { stored: await sizing.dataSize({ ns }), kept: { size: Number(kept.bytes), numObjects: Number(kept.documents) } };
  }

  it('follows inserts, updates, deletes and a COPY, and not a rolled back write', async () => {
    const ns = await collection([1]);
    const table = tableName((await storage.localCollection(ns))!.uuid);
    const check = async () => {
      const { stored, kept } = await storedAndKept(ns);
      expect(kept).toEqual(stored);
    };
    await check();
    await db.dataSource.query(
      `INSERT INTO ${table} (id, shard_key, doc, size, valid_from)
       SELECT int4send(i), int4send(i), json_build_object('_id', i), 200 + i % 100, 0 FROM generate_series(1, 5000) i`,
    );
    await check();
    await db.dataSource.transaction(async (manager) => {
      await manager.query("SELECT set_config('tessera.write_time', '0', true), set_config('tessera.keep_history', 'off', true)");
      await manager.query(`UPDATE ${table} SET size = size + 7 WHERE shard_key < int4send(1000)`);
      await manager.query(`UPDATE ${table} SET doc = doc WHERE shard_key < int4send(1000)`); // no size changed
    });
    await check();
    await db.dataSource.transaction(async (manager) => {
      await manager.query("SELECT set_config('tessera.write_time', '0', true), set_config('tessera.keep_history', 'off', true)");
      await manager.query(`DELETE FROM ${table} WHERE shard_key >= int4send(4000)`);
    });
    await check();
    await expect(
      db.dataSource.transaction(async (manager) => {
        await manager.query(
          `INSERT INTO ${table} (id, shard_key, doc, size, valid_from) VALUES (int4send(-1), int4send(-1), '{}', 999, 0)`,
        );
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await check();
    // A migration's clone: COPY text out of one table (keys of 4 bytes), into another collection's.
    const target = await collection([]);
    const text = await copyRangeOut(db.dataSource, table, { min: Buffer.alloc(0), max: Buffer.alloc(8, 0xff) }, undefined, 300);
    const runner = db.dataSource.createQueryRunner();
    try {
      await runner.startTransaction();
      await runner.query("SELECT set_config('tessera.write_time', '0', true)");
      await copyRowsIn(runner, tableName((await storage.localCollection(target))!.uuid), text, target);
      await runner.commitTransaction();
    } finally {
      await runner.release();
    }
    const { stored, kept } = await storedAndKept(target);
    expect(stored.numObjects).toBe(300);
    expect(kept).toEqual(stored);
  });

  it('counts each change once while writes and other requests run at once, reading no whole table', async () => {
    const ns = await collection([]);
    const table = tableName((await storage.localCollection(ns))!.uuid);
    const query = vi.spyOn(db.dataSource, 'query');
    try {
      await Promise.all([
        ...Array.from({ length: 8 }, async (_, writer) => {
          for (let i = 0; i < 20; i++) {
            const id = writer * 1000 + i;
            await db.dataSource.query(
              `INSERT INTO ${table} (id, shard_key, doc, size, valid_from) VALUES (int4send($1), int4send($1), '{}', 100 + $1 % 50, 0)`,
              [id],
            );
          }
        }),
        ...Array.from({ length: 4 }, async () => {
          for (let i = 0; i < 10; i++) await sizing.statsForBalancing({ namespaces: [ns] });
        }),
      ]);
      const reads = query.mock.calls.map(([sql]) => String(sql)).filter((sql) => !sql.startsWith('INSERT'));
      expect(reads.filter((sql) => sql.includes(table) && !sql.includes('shard_key >='))).toEqual([]);
    } finally {
      query.mockRestore();
    }
    const { stored, kept } = await storedAndKept(ns);
    expect(stored.numObjects).toBe(160);
    expect(kept).toEqual(stored);
  });

  it('starts a new collection at zero and forgets a dropped one', async () => {
    const ns = await collection([1, 2, 3]);
    const uuid = (await storage.localCollection(ns))!.uuid;
    expect((await storedAndKept(ns)).kept.numObjects).toBe(3);
    await storage.dropCollection(uuid);
    expect(await db.dataSource.query('SELECT 1 FROM collection_sizes WHERE collection_uuid = $1', [uuid])).toEqual([]);
    expect(await db.dataSource.query('SELECT 1 FROM collection_size_changes WHERE collection_uuid = $1', [uuid])).toEqual([]);
  });
});

describe('splitVector', () => {
  it('cuts a range into pieces of about half the max chunk size', async () => {
    const ns = await collection(Array.from({ length: 1000 }, (_, i) => i));
    const { size } = await sizing.dataSize({ ns });
    const result = await splitter.splitVector({ ns, range: { min: MIN, max: MAX }, maxChunkSizeBytes: Math.ceil(size / 5) });
    // Pieces of a tenth of the data: about 9 split points, strictly increasing.
    expect(result.splitKeys.length).toBeGreaterThanOrEqual(8);
    expect(result.splitKeys.length).toBeLessThanOrEqual(10);
    const xs = result.splitKeys.map((k) => k[0] as number);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
    expect(new Set(xs).size).toBe(xs.length);
    expect(result.unsplittable).toBe(false);
  });

  it('does not split a range holding less than the max', async () => {
    const ns = await collection([1, 2, 3]);
    expect(await splitter.splitVector({ ns, range: { min: MIN, max: MAX }, maxChunkSizeBytes: 1_000_000 })).toEqual({
      splitKeys: [],
      unsplittable: false,
    });
  });

  it('finds a large range under the max from a sample and a count, without summing every document', async () => {
    const ns = await collection(Array.from({ length: 5000 }, (_, i) => i));
    const exact = await sizing.dataSize({ ns });
    const query = vi.spyOn(db.dataSource, 'query');
    try {
      const under = await splitter.splitVectorSized({ ns, range: { min: MIN, max: MAX }, maxChunkSizeBytes: exact.size + 1 });
      expect(under.result).toEqual({ splitKeys: [], unsplittable: false });
      expect(under.size.numObjects).toBe(5000);
      expect(Math.abs(under.size.size - exact.size) / exact.size).toBeLessThan(0.05);
      expect(query.mock.calls.filter(([sql]) => /sum\(size\)/.test(String(sql)) && !/LIMIT/.test(String(sql)))).toEqual([]);
      // At the max the exact size decides, and the range splits.
      const over = await splitter.splitVectorSized({ ns, range: { min: MIN, max: MAX }, maxChunkSizeBytes: exact.size });
      expect(over.size).toEqual(exact);
      expect(over.result.splitKeys).toHaveLength(1);
    } finally {
      query.mockRestore();
    }
  });

  it("takes a range well under the max from the planner's estimate (analyzing a table without statistics), counting no documents", async () => {
    const ns = await collection(Array.from({ length: 5000 }, (_, i) => i));
    await statisticsCaughtUp(ns, 5000);
    const exact = await sizing.dataSize({ ns });
    const query = vi.spyOn(db.dataSource, 'query');
    try {
      const under = await splitter.splitVectorSized({ ns, range: { min: [1000], max: [3000] }, maxChunkSizeBytes: 4 * exact.size });
      expect(under.result).toEqual({ splitKeys: [], unsplittable: false });
      expect(Math.abs(under.size.numObjects - 2000) / 2000).toBeLessThan(0.2);
      expect(query.mock.calls.filter(([sql]) => /count\(\*\)/.test(String(sql)) && !/LIMIT/.test(String(sql)))).toEqual([]);
    } finally {
      query.mockRestore();
    }
  });

  it('splits a range its sample took in whole by that measure alone, whatever the planner would guess', async () => {
    const ns = await collection(Array.from({ length: 500 }, (_, i) => i));
    const { size } = await sizing.dataSize({ ns });
    const query = vi.spyOn(db.dataSource, 'query');
    try {
      const over = await splitter.splitVectorSized({ ns, range: { min: MIN, max: MAX }, maxChunkSizeBytes: Math.ceil(size / 4) });
      expect(over.size).toEqual({ size, numObjects: 500 });
      expect(over.result.splitKeys.length).toBeGreaterThanOrEqual(6);
      expect(query.mock.calls.filter(([sql]) => /EXPLAIN|ANALYZE|count\(\*\) AS n FROM c_/.test(String(sql)))).toEqual([]);
    } finally {
      query.mockRestore();
    }
  });

  it("does not take the planner's word for rows written since the last ANALYZE: increasing keys past its histogram still split", async () => {
    const ns = await collection(Array.from({ length: 2000 }, (_, i) => i));
    const uuid = (await storage.localCollection(ns))!.uuid;
    await db.dataSource.query(`ANALYZE ${tableName(uuid)}`);
    const handle = { ns, table: tableName(uuid), pattern: parseShardKeyPattern({ x: 1 }), owns: () => true, writeTime: writeTimeNow() };
    const later = Array.from({ length: 3000 }, (_, i) => ({ _id: 2000 + i, x: 2000 + i, pad: 'p'.repeat(100) }));
    await new DocumentStore(db.dataSource).insert(handle, later, { ordered: true, generateId: () => new ObjectId() });
    // The statistics count the writes once the inserting connection reports them (within a second or so).
    for (let i = 0; i < 150; i++) {
      const [{ n }] = (await db.dataSource.query(`SELECT n_mod_since_analyze AS n FROM pg_stat_user_tables WHERE relid = $1::regclass`, [
        tableName(uuid),
      ])) as [{ n: string }];
      if (Number(n) >= 3000) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const range = { min: [2000], max: MAX };
    const { size } = await sizing.dataSize({ ns, range });
    const over = await splitter.splitVectorSized({ ns, range, maxChunkSizeBytes: size - 1 });
    expect(over.size).toEqual({ size, numObjects: 3000 });
    expect(over.result.splitKeys.length).toBeGreaterThanOrEqual(1);
  });

  it('finds no split point when every document has the same shard key: the chunk is unsplittable', async () => {
    const ns = await collection(Array.from({ length: 200 }, () => 7));
    expect(await splitter.splitVector({ ns, range: { min: MIN, max: MAX }, maxChunkSizeBytes: 1000 })).toEqual({
      splitKeys: [],
      unsplittable: true,
    });
  });

  it('stops at maxSplitPoints', async () => {
    const ns = await collection(Array.from({ length: 500 }, (_, i) => i));
    const result = await splitter.splitVector({ ns, range: { min: MIN, max: MAX }, maxChunkSizeBytes: 500, maxSplitPoints: 3 });
    expect(result.splitKeys).toHaveLength(3);
  });
});
