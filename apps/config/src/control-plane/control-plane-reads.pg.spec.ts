import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { encodeKey } from '@tessera/core';
import { EVENT_TOPICS, shardKeyToWire, topicsOfKind } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { catalogServices, caught, k, wireRange } from '../catalog/catalog-fixture.js';
import type { CatalogReadService } from '../catalog/catalog-read.service.js';
import { seedShardedCollection } from '../catalog/catalog-seed.js';
import type { MetadataCommitService } from '../catalog/metadata-commit.service.js';
import { ChangelogService, eventOfRow } from '../changelog/changelog.service.js';
import type { EventBusService } from '../events/event-bus.service.js';
import { ControlPlaneReadsService } from './control-plane-reads.service.js';
import { EventsResolver } from './events.resolver.js';
import { placementChangeOf } from './placement-change.js';

let db: TestDatabase;
let reads: ControlPlaneReadsService;
let commits: MetadataCommitService;
let catalog: CatalogReadService;
let seq = 0;

beforeAll(async () => {
  db = await createTestDatabase('config');
  reads = new ControlPlaneReadsService(db.dataSource, {} as never, {} as never);
  ({ commits, reads: catalog } = catalogServices(db.dataSource));
});
afterAll(async () => db?.drop());

/** A collection `d.cN` with chunks [MinKey,0), [0,10), [10,20), [20,MaxKey) round-robin over `shards`. */
async function collection(shards: string[]) {
  const ns = `d.c${++seq}`;
  const seeded = await seedShardedCollection(db.dataSource, { ns, shards, splitPoints: [0, 10, 20].map((p) => k(p)) });
  const cv = (await catalog.getCollection(ns)).collectionVersion;
  return { ns, uuid: seeded.uuid, cv, generation: { epoch: cv.epoch, timestamp: cv.timestamp } };
}

/** Writes changelog rows of these kinds, each in its own transaction (so each gets a seq), and answers the seq before them. */
async function logKinds(kinds: readonly string[], ns: string): Promise<number> {
  const [{ last }] = (await db.dataSource.query('SELECT coalesce(max(seq), 0)::int AS last FROM changelog')) as [{ last: number }];
  const changelog = new ChangelogService({ TESSERA_NODE_NAME: 'test' } as never);
  for (const what of kinds) await db.dataSource.transaction((manager) => changelog.record(manager, { what, ns }));
  return last;
}

const KINDS = [
  'split',
  'moveChunk.commit',
  'moveChunk.progress',
  'moveRange.end',
  'balancer.round',
  'addShard',
  'createDatabase',
  'shardCollection.end',
  'session.started',
  'transaction.committed',
  'routerStarted',
  'auto_merge%',
];

describe('Query.changelog with a topics filter', () => {
  it('answers exactly the entries having one of the topics, as topicsOfKind assigns them, for every topic and pair', async () => {
    const ns = `topics.c${++seq}`;
    const after = await logKinds(KINDS, ns);
    const filters = [...EVENT_TOPICS.map((t) => [t]), ['placement', 'reports'], ['sessions', 'transactions'], ['ddl', 'topology']];
    for (const topics of filters) {
      const page = await reads.changelog({ ns, topics, after, first: 100 });
      const expected = KINDS.filter((kind) => topicsOfKind(kind).some((t) => topics.includes(t)));
      expect({ topics, kinds: page.nodes.map((e) => e.kind) }).toEqual({ topics, kinds: expected });
      expect(page.nodes.every((e) => e.topics.some((t) => topics.includes(t)))).toBe(true);
    }
  });

  it('combines topics with kinds, and an empty list of topics selects nothing', async () => {
    const ns = `topics.c${++seq}`;
    const after = await logKinds(KINDS, ns);
    const both = await reads.changelog({ ns, topics: ['migrations'], kinds: ['moveChunk.commit', 'split'], after, first: 100 });
    expect(both.nodes.map((e) => e.kind)).toEqual(['moveChunk.commit']);
    expect((await reads.changelog({ ns, topics: [], after, first: 100 })).nodes).toEqual([]);
  });

  it('refuses a topic that does not exist, naming it', async () => {
    const error = await caught(() => reads.changelog({ topics: ['placement', 'splits'], first: 10 }));
    expect(error).toMatchObject({ code: 'BAD_VALUE', details: { topics: ['splits'] } });
  });

  it('is passed on by the resolver', async () => {
    const ns = `topics.c${++seq}`;
    const after = await logKinds(KINDS, ns);
    const resolver = new EventsResolver({} as EventBusService, reads);
    const page = await resolver.changelog({ ns, topics: ['balancer'] }, undefined, undefined, String(after), 100);
    expect(page.nodes.map((e) => e.kind)).toEqual(['balancer.round']);
  });
});

describe('size estimates in the control plane', () => {
  it("Collection.chunks and distribution answer the shards' estimates, with document sums, how many chunks have one and the jumbo ones", async () => {
    const { ns, generation } = await collection(['a', 'b']);
    await commits.markJumbo({ ns, generation, range: wireRange(20, 'max') });
    // [MinKey,0) a, [0,10) b, [10,20) a, [20,MaxKey) b
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange('min', 0), estimatedSizeBytes: 1000, estimatedDocuments: 10 });
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(10, 20), estimatedSizeBytes: 500, estimatedDocuments: 4 });
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(0, 10), estimatedSizeBytes: 300 });
    const chunks = await reads.chunks(ns, { first: 10 });
    expect(chunks.nodes.map((c) => [c.shard, c.estimatedSizeBytes, c.estimatedDocuments])).toEqual([
      ['a', 1000, 10],
      ['b', 300, null],
      ['a', 500, 4],
      ['b', null, null],
    ]);
    expect(await reads.distribution(ns)).toEqual([
      { shard: 'a', chunks: 2, estimatedChunks: 2, estimatedDataBytes: 1500, documents: 14, jumboChunks: 0 },
      { shard: 'b', chunks: 2, estimatedChunks: 1, estimatedDataBytes: 300, documents: null, jumboChunks: 1 },
    ]);
  });

  it('a report without a document count clears the older count of the chunk', async () => {
    const { ns, generation } = await collection(['a']);
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(0, 10), estimatedSizeBytes: 100, estimatedDocuments: 1 });
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(0, 10), estimatedSizeBytes: 200 });
    const chunk = (await reads.chunks(ns, { first: 10 })).nodes[1]!;
    expect([chunk.estimatedSizeBytes, chunk.estimatedDocuments]).toEqual([200, null]);
  });

  it('a merge sums the estimates of its parts when all have one, and its placement change shows them', async () => {
    const { ns, generation, cv } = await collection(['a']);
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(0, 10), estimatedSizeBytes: 100, estimatedDocuments: 1 });
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(10, 20), estimatedSizeBytes: 250, estimatedDocuments: 3 });
    await commits.commitMerge({ ns, shard: 'a', range: wireRange(0, 20), expectedCollectionVersion: cv });
    const merged = (await reads.chunks(ns, { first: 10 })).nodes[1]!;
    expect([merged.estimatedSizeBytes, merged.estimatedDocuments]).toEqual([350, 4]);
    const change = placementChangeOf(
      eventOfRow((await db.dataSource.query("SELECT * FROM changelog WHERE ns = $1 AND what = 'merge'", [ns]))[0]),
    );
    expect(change.before.map((c) => [c.estimatedSizeBytes, c.estimatedDocuments])).toEqual([
      [100, 1],
      [250, 3],
    ]);
    expect(change.after.map((c) => [c.estimatedSizeBytes, c.estimatedDocuments])).toEqual([[350, 4]]);
  });

  it('a merge of a part without an estimate leaves the merged chunk without one', async () => {
    const { ns, generation, cv } = await collection(['a']);
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(0, 10), estimatedSizeBytes: 100, estimatedDocuments: 1 });
    await commits.commitMerge({ ns, shard: 'a', range: wireRange(0, 20), expectedCollectionVersion: cv });
    expect((await reads.chunks(ns, { first: 10 })).nodes[1]!.estimatedSizeBytes).toBeNull();
  });

  it("a migration commit's placement change shows the moved chunk's estimate, which it keeps; a split's pieces have none", async () => {
    const { ns, generation, cv } = await collection(['a', 'b']);
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(10, 20), estimatedSizeBytes: 700, estimatedDocuments: 7 });
    const moved = await commits.commitMigration({
      ns,
      range: wireRange(10, 20),
      donor: 'a',
      recipient: 'b',
      expectedCollectionVersion: cv,
    });
    const [event] = await db.dataSource.query("SELECT * FROM changelog WHERE ns = $1 AND what = 'moveChunk.commit'", [ns]);
    const change = placementChangeOf(eventOfRow(event));
    expect(change.after[0]).toMatchObject({ shard: 'b', estimatedSizeBytes: 700, estimatedDocuments: 7 });
    expect(change.before[0]).toMatchObject({ shard: 'a', estimatedSizeBytes: 700, estimatedDocuments: 7 });
    expect((await reads.chunks(ns, { first: 10, shard: 'b' })).nodes.find((c) => c.estimatedSizeBytes === 700)).toBeDefined();

    await commits.commitSplit({
      ns,
      shard: 'b',
      range: wireRange(10, 20),
      splitPoints: [shardKeyToWire(k(15))],
      expectedCollectionVersion: moved.collectionVersion,
    });
    const [split] = await db.dataSource.query("SELECT * FROM changelog WHERE ns = $1 AND what = 'split'", [ns]);
    const pieces = placementChangeOf(eventOfRow(split));
    expect(pieces.before.map((c) => c.estimatedSizeBytes)).toEqual([700]);
    expect(pieces.after.map((c) => c.estimatedSizeBytes)).toEqual([null, null]);
  });

  it("an active migration's estimatedBytes is the chunk's estimate until the donor reports its measurement, then that", async () => {
    const { ns, uuid, generation } = await collection(['a', 'b']);
    await commits.recordChunkSizeEstimate({ ns, generation, range: wireRange(10, 20), estimatedSizeBytes: 900, estimatedDocuments: 9 });
    const id = randomUUID();
    await db.dataSource.query(
      `INSERT INTO active_migrations (id, ns, collection_uuid, min, max, min_ejson, max_ejson, donor, recipient)
       VALUES ($1, $2, $3, $4, $5, '{"x":10}', '{"x":20}', 'a', 'b')`,
      [id, ns, uuid, Buffer.from(encodeKey(k(10))), Buffer.from(encodeKey(k(20)))],
    );
    const before = (await reads.migrations(ns, 0)).active;
    expect(before.map((m) => [m.migrationId, m.estimatedBytes, m.estimatedDocuments])).toEqual([[id, 900, 9]]);

    const changelog = new ChangelogService({ TESSERA_NODE_NAME: 'shard-a' } as never);
    await db.dataSource.transaction((manager) =>
      changelog.record(manager, { what: 'moveChunk.start', ns, details: { migrationId: id, documents: 12, bytes: 1200 } }),
    );
    const after = (await reads.migrations(ns, 0)).active;
    expect(after.map((m) => [m.migrationId, m.estimatedBytes, m.estimatedDocuments])).toEqual([[id, 1200, 12]]);
  });

  it('an active migration of a chunk without an estimate and no donor report has none', async () => {
    const { ns, uuid } = await collection(['a', 'b']);
    await db.dataSource.query(
      `INSERT INTO active_migrations (id, ns, collection_uuid, min, max, min_ejson, max_ejson, donor, recipient)
       VALUES ($1, $2, $3, $4, $5, '{"x":0}', '{"x":10}', 'b', 'a')`,
      [randomUUID(), ns, uuid, Buffer.from(encodeKey(k(0))), Buffer.from(encodeKey(k(10)))],
    );
    expect((await reads.migrations(ns, 0)).active.map((m) => m.estimatedBytes)).toEqual([null]);
  });
});
