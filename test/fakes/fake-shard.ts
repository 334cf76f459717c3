/**
 * A shard's DDL routes (the collection half of `ShardClient`) over the `FakeNetwork`, for specs of
 * the config server's DDL. It keeps the shard's local catalog in memory as the real shard keeps
 * it in Postgres (`apps/shard/src/collections/collection-storage.service.ts`): one collection per
 * uuid and at most one per namespace, every route idempotent, so a DDL's end state can be read
 * back and a repeated phase shows whether it doubles anything.
 *
 *     const shard0 = new FakeShard(network, 'http://shard0.test:4001');
 *     shard0.storeUnsharded('app.logs', 3);
 *     ... run a DDL ...
 *     expect(shard0.collections.get(uuid)?.keyPattern).toEqual({ uid: 1 });
 */
import { randomUUID } from 'node:crypto';
import { TesseraError } from '@tessera/core';
import { ShardClient } from '@tessera/protocol';
import type { FakeNetwork, FakeRequest } from './fake-network.js';

type KeyPattern = Record<string, 1 | 'hashed'>;

/** A collection as the shard's local catalog holds it. */
export interface FakeCollection {
  ns: string;
  keyPattern: KeyPattern;
  unique: boolean;
  documents: number;
}

/** Bytes a stored document counts for in the shard's stats. */
const DOCUMENT_BYTES = 100;

export class FakeShard {
  /** The shard's collections by uuid. */
  readonly collections = new Map<string, FakeCollection>();
  /** The namespaces the shard was asked to refresh, in order. */
  readonly refreshed: string[] = [];
  /** movePrimary's database critical sections held here, by database. */
  readonly sections = new Map<string, { reason: string; blocksReads: boolean }>();

  constructor(
    private readonly network: FakeNetwork,
    readonly url: string,
  ) {
    network
      .node(url)
      .on('PUT', '/internal/collections/:uuid', (r) => this.createCollection(r))
      .on('DELETE', '/internal/collections/:uuid', (r) => {
        this.collections.delete(r.params.uuid!);
        return { ok: 1 };
      })
      .on('POST', '/internal/collections/:uuid/refine', (r) => this.refine(r))
      .on('POST', '/internal/collections/:uuid/rename', (r) => this.rename(r))
      .on('GET', '/internal/namespaces/:ns', (r) => {
        const [uuid, found] = this.byNamespace(r.params.ns!) ?? [];
        if (uuid === undefined || found === undefined) {
          throw new TesseraError('NAMESPACE_NOT_FOUND', `this shard stores no collection ${r.params.ns}`, { details: { ns: r.params.ns } });
        }
        return { uuid, keyPattern: found.keyPattern, documents: found.documents };
      })
      .on('DELETE', '/internal/namespaces/:ns', (r) => ({ dropped: this.dropWhere((c) => c.ns === r.params.ns) > 0 }))
      .on('GET', '/internal/databases/:db/namespaces', (r) => ({ namespaces: this.namespacesOf(r.params.db!) }))
      .on('DELETE', '/internal/databases/:db', (r) => ({ dropped: this.dropWhere((c) => databaseOf(c.ns) === r.params.db) }))
      .on('GET', '/internal/stats', () => ({
        dataSizeBytes: [...this.collections.values()].reduce((sum, c) => sum + c.documents * DOCUMENT_BYTES, 0),
        collections: this.collections.size,
      }))
      .on('POST', '/internal/data/refreshMetadata', (r) => {
        this.refreshed.push((r.body as { ns: string }).ns);
        return { shardVersion: null };
      })
      .on('POST', '/internal/databases/:db/enterCriticalSection', (r) => this.enterCriticalSection(r))
      .on('POST', '/internal/databases/:db/exitCriticalSection', (r) => {
        if (this.sections.get(r.params.db!)?.reason === (r.body as { reason: string }).reason) this.sections.delete(r.params.db!);
        return { ok: 1 };
      })
      .on('POST', '/internal/databases/:db/cloneCatalogData', (r) => this.cloneCatalogData(r))
      .on('POST', '/internal/databases/:db/dropStaleData', (r) => {
        const { collections } = r.body as { collections: string[] };
        return { dropped: this.dropWhere((c) => collections.includes(c.ns)) };
      })
      .on('GET', '/internal/namespaces/:ns/cloneSource', (r) => {
        const [uuid, found] = this.byNamespace(r.params.ns!) ?? [];
        if (uuid === undefined || found === undefined)
          throw new TesseraError('NAMESPACE_NOT_FOUND', `this shard stores no collection ${r.params.ns}`);
        return { uuid, keyPattern: found.keyPattern, indexes: [] };
      });
  }

  /** A collection written before it was sharded: its own uuid, keyed by `_id`, holding `documents`. Answers its uuid. */
  storeUnsharded(ns: string, documents: number): string {
    const uuid = randomUUID();
    this.collections.set(uuid, { ns, keyPattern: { _id: 1 }, unique: false, documents });
    return uuid;
  }

  /** A sharded collection's table, as shardCollection would have created it. */
  storeSharded(uuid: string, collection: FakeCollection): void {
    this.collections.set(uuid, collection);
  }

  /** The namespaces the shard stores for a database, in order. */
  namespacesOf(db: string): string[] {
    return [...this.collections.values()]
      .filter((c) => databaseOf(c.ns) === db)
      .map((c) => c.ns)
      .sort();
  }

  /** Creates the collection, or gives an existing one of that uuid the key pattern (the real shard's upsert). */
  private createCollection(request: FakeRequest): { ok: 1 } {
    const uuid = request.params.uuid!;
    const spec = request.body as { ns: string; keyPattern: KeyPattern; unique?: boolean };
    const existing = this.collections.get(uuid);
    if (existing !== undefined) {
      existing.keyPattern = spec.keyPattern;
      return { ok: 1 };
    }
    const [other] = this.byNamespace(spec.ns) ?? [];
    if (other !== undefined) {
      // What the real shard answers: its local catalog holds one collection per namespace.
      throw new TesseraError('INTERNAL', `duplicate key value violates unique constraint "collections_ns_key" (${spec.ns} is ${other})`);
    }
    this.collections.set(uuid, { ns: spec.ns, keyPattern: spec.keyPattern, unique: spec.unique ?? false, documents: 0 });
    return { ok: 1 };
  }

  private enterCriticalSection(request: FakeRequest): { ok: 1 } {
    const db = request.params.db!;
    const { reason, blockReads } = request.body as { reason: string; blockReads: boolean };
    const held = this.sections.get(db);
    if (held !== undefined && held.reason !== reason) {
      throw new TesseraError(
        'CONFLICTING_OPERATION',
        `the critical section of database ${db} is held by another operation (${held.reason})`,
        { details: { db, heldBy: held.reason } },
      );
    }
    this.sections.set(db, { reason, blocksReads: (held?.blocksReads ?? false) || blockReads });
    return { ok: 1 };
  }

  /** The real recipient's clone, done at once: each collection dropped here, then copied whole (uuid, key, documents) from the donor. */
  private async cloneCatalogData(request: FakeRequest): Promise<unknown> {
    const { from, collections } = request.body as { from: string; collections: string[] };
    const donor = new ShardClient(from, this.network.clientOptions());
    const cloned = [];
    for (const ns of collections) {
      const source = await donor.describeNamespace(ns);
      this.dropWhere((c) => c.ns === ns);
      this.collections.set(source.uuid, { ns, keyPattern: source.keyPattern, unique: false, documents: source.documents });
      cloned.push({ ns, documents: source.documents, bytes: source.documents * DOCUMENT_BYTES, sessions: 0, done: true });
    }
    return { state: 'done', collections: cloned };
  }

  /** The real shard's rename: the target dropped first when asked, idempotent. */
  private rename(request: FakeRequest): { renamed: boolean } {
    const found = this.collections.get(request.params.uuid!);
    const { to, dropTarget } = request.body as { to: string; dropTarget: boolean };
    if (found === undefined) return { renamed: false };
    if (found.ns === to) return { renamed: true };
    const [target] = this.byNamespace(to) ?? [];
    if (target !== undefined && !dropTarget) throw new TesseraError('NAMESPACE_EXISTS', `target namespace ${to} exists`);
    if (target !== undefined) this.collections.delete(target);
    found.ns = to;
    return { renamed: true };
  }

  private refine(request: FakeRequest): { rekeyed: number } {
    const found = this.collections.get(request.params.uuid!);
    if (found === undefined) return { rekeyed: 0 };
    found.keyPattern = (request.body as { keyPattern: KeyPattern }).keyPattern;
    return { rekeyed: found.documents };
  }

  private byNamespace(ns: string): [string, FakeCollection] | undefined {
    return [...this.collections.entries()].find(([, c]) => c.ns === ns);
  }

  private dropWhere(matches: (collection: FakeCollection) => boolean): number {
    const uuids = [...this.collections.entries()].filter(([, c]) => matches(c)).map(([uuid]) => uuid);
    for (const uuid of uuids) this.collections.delete(uuid);
    return uuids.length;
  }
}

function databaseOf(ns: string): string {
  return ns.slice(0, ns.indexOf('.'));
}
