import { Injectable } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import { InternalClients } from '@tessera/platform';
import { CatalogCache } from '@tessera/routing';
import { ShardIdentityService } from '../identity/shard-identity.service.js';
import type { FilteringMetadata } from './sharding-state.js';
import { ShardingState } from './sharding-state.js';

/** What an operation does to a collection, for the critical section. */
export type OperationKind = 'read' | 'write';

/** An operation's hold on a collection: its ownership view, kept until `release`. */
export interface OperationLease {
  readonly metadata: FilteringMetadata;
  release(): void;
}

interface CriticalSection {
  reason: string;
  blocksReads: boolean;
  released: Promise<void>;
  release(): void;
}

interface CollectionActivity {
  /** Operations under way, each with the ownership view it started with. */
  leases: Set<{ kind: OperationKind; metadata: FilteringMetadata }>;
  /** Woken (and replaced) whenever a lease ends. */
  changed: { promise: Promise<void>; resolve(): void };
}

/**
 * The shard's runtime sharding state (MongoDB's ShardingState, CollectionShardingRuntime and
 * MetadataManager together): the versioned view of placement, the critical sections a
 * migration takes on a collection and movePrimary on a database's unsharded collections
 * (DatabaseShardingState's), and the operations under way with the ownership view each
 * started with (MongoDB's RangePreserver), which the range deleter waits for.
 *
 * An operation enters through `enter`: it waits out a critical section that blocks it, checks
 * its routing version, and registers, all before it touches the table. A critical section
 * blocks new operations at once and waits for the writes already under way, so when it is
 * held no write to the collection is running.
 */
@Injectable()
export class ShardingRuntime {
  private sharding: Promise<ShardingState> | undefined;
  private readonly criticalSections = new Map<string, CriticalSection>();
  /** movePrimary's sections, by database: they hold the database's unsharded collections only. */
  private readonly databaseSections = new Map<string, CriticalSection>();
  private readonly activity = new Map<string, CollectionActivity>();

  constructor(
    private readonly identity: ShardIdentityService,
    private readonly clients: InternalClients,
  ) {}

  /** The shard's versioned view of placement, made once this shard knows its name and config server. */
  state(): Promise<ShardingState> {
    this.sharding ??= (async () => {
      const identity = await this.identity.get();
      if (identity === null) {
        this.sharding = undefined;
        throw new TesseraError('ILLEGAL_OPERATION', 'this shard has not been added to a cluster yet (addShard gives it its identity)');
      }
      return new ShardingState(identity.shardName, new CatalogCache(this.clients.config(identity.configUrl)));
    })();
    return this.sharding;
  }

  /**
   * Admits an operation on `ns`: waits while a critical section blocks it, then runs `check`
   * (the routing version check, which refreshes and may throw `STALE_CONFIG`), and registers the
   * view it answers. After a critical section ends the check runs again, so a request sent with
   * the placement from before a migration commit is told it is stale.
   */
  async enter(ns: string, kind: OperationKind, check: () => Promise<FilteringMetadata>): Promise<OperationLease> {
    for (;;) {
      await this.waitOutCriticalSection(ns, kind);
      const metadata = await check();
      // Synchronous from here: a critical section entered during the check is seen now.
      if (this.blocking(ns, kind) !== undefined) continue;
      // Whether the database's section applies is known only from the check: it holds unsharded collections.
      const databaseSection = metadata.info.kind === 'unsharded' ? this.blockingDatabase(ns, kind) : undefined;
      if (databaseSection !== undefined) {
        await databaseSection.released;
        continue;
      }
      return this.register(ns, kind, metadata);
    }
  }

  /**
   * Takes (or, called again with the same `reason`, strengthens) the critical section of the
   * database `db`, movePrimary's: operations on its unsharded collections that write (and read,
   * with `blockReads`) wait from now on, and it resolves when the writes already under way on
   * them have finished. Sharded collections are not held. Throws `CONFLICTING_OPERATION` while
   * another reason holds it.
   */
  async enterDatabaseCriticalSection(db: string, reason: string, blockReads: boolean): Promise<void> {
    let section = this.databaseSections.get(db);
    if (section !== undefined && section.reason !== reason) {
      throw new TesseraError('CONFLICTING_OPERATION', `the critical section of database ${db} is already held (${section.reason})`, {
        details: { db },
      });
    }
    if (section === undefined) {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      section = { reason, blocksReads: false, released, release };
      this.databaseSections.set(db, section);
    }
    section.blocksReads ||= blockReads;
    await this.waitForUnshardedWrites(db);
  }

  /** Releases the database's critical section if `reason` holds it; operations waiting on it check their versions again. */
  exitDatabaseCriticalSection(db: string, reason: string): void {
    const section = this.databaseSections.get(db);
    if (section === undefined || section.reason !== reason) return;
    this.databaseSections.delete(db);
    section.release();
  }

  /** The database's critical section, if one is held: its reason and whether it blocks reads. */
  databaseCriticalSection(db: string): { reason: string; blocksReads: boolean } | undefined {
    const section = this.databaseSections.get(db);
    return section && { reason: section.reason, blocksReads: section.blocksReads };
  }

  /**
   * Takes the critical section on `ns`: new writes wait from now on (reads too once
   * `blockReads` is called), and it resolves when the writes already under way have finished.
   * Throws `CONFLICTING_OPERATION` if one is already held.
   */
  async enterCriticalSection(ns: string, reason: string): Promise<{ blockReads(): void; release(): void }> {
    if (this.criticalSections.has(ns)) {
      throw new TesseraError(
        'CONFLICTING_OPERATION',
        `the critical section of ${ns} is already held (${this.criticalSections.get(ns)!.reason})`,
        {
          details: { ns },
        },
      );
    }
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const section: CriticalSection = { reason, blocksReads: false, released, release };
    this.criticalSections.set(ns, section);
    const handle = {
      blockReads: () => {
        section.blocksReads = true;
      },
      release: () => {
        if (this.criticalSections.get(ns) === section) this.criticalSections.delete(ns);
        section.release();
      },
    };
    try {
      await this.waitUntil(ns, (lease) => lease.kind !== 'write');
    } catch (error) {
      handle.release();
      throw error;
    }
    return handle;
  }

  /** True while a critical section is held on `ns`. */
  inCriticalSection(ns: string): boolean {
    return this.criticalSections.has(ns);
  }

  /**
   * Resolves when no operation on `ns` still uses an ownership view in which this shard owns the
   * document with shard key `encodedKey`: what the range deleter waits for before deleting a
   * range this shard has lost.
   */
  waitForViewsWithout(ns: string, encodedKey: Uint8Array): Promise<void> {
    return this.waitUntil(ns, (lease) => !lease.metadata.owns(encodedKey));
  }

  /** How many operations on `ns` are under way (for tests and status). */
  operationsUnderWay(ns: string): number {
    return this.activity.get(ns)?.leases.size ?? 0;
  }

  private blocking(ns: string, kind: OperationKind): CriticalSection | undefined {
    return blockingOf(this.criticalSections.get(ns), kind);
  }

  private blockingDatabase(ns: string, kind: OperationKind): CriticalSection | undefined {
    return blockingOf(this.databaseSections.get(ns.slice(0, ns.indexOf('.'))), kind);
  }

  /** Resolves when no write on an unsharded collection of `db` is under way. */
  private async waitForUnshardedWrites(db: string): Promise<void> {
    const holds = (lease: { kind: OperationKind; metadata: FilteringMetadata }) =>
      lease.kind === 'write' && lease.metadata.info.kind === 'unsharded';
    for (;;) {
      const busy = [...this.activity.entries()].find(([ns, activity]) => ns.startsWith(`${db}.`) && [...activity.leases].some(holds));
      if (busy === undefined) return;
      await busy[1].changed.promise;
    }
  }

  private async waitOutCriticalSection(ns: string, kind: OperationKind): Promise<void> {
    for (let section = this.blocking(ns, kind); section !== undefined; section = this.blocking(ns, kind)) {
      await section.released;
    }
  }

  private register(ns: string, kind: OperationKind, metadata: FilteringMetadata): OperationLease {
    let activity = this.activity.get(ns);
    if (activity === undefined) this.activity.set(ns, (activity = { leases: new Set(), changed: signal() }));
    const lease = { kind, metadata };
    activity.leases.add(lease);
    let released = false;
    return {
      metadata,
      release: () => {
        if (released) return;
        released = true;
        const current = this.activity.get(ns)!;
        current.leases.delete(lease);
        const changed = current.changed;
        if (current.leases.size === 0) this.activity.delete(ns);
        else current.changed = signal();
        changed.resolve();
      },
    };
  }

  private async waitUntil(ns: string, done: (lease: { kind: OperationKind; metadata: FilteringMetadata }) => boolean): Promise<void> {
    for (;;) {
      const activity = this.activity.get(ns);
      if (activity === undefined || [...activity.leases].every(done)) return;
      await activity.changed.promise;
    }
  }
}

/** The section, if it holds an operation of `kind`: writes always, reads once it blocks them. */
function blockingOf(section: CriticalSection | undefined, kind: OperationKind): CriticalSection | undefined {
  return section !== undefined && (kind === 'write' || section.blocksReads) ? section : undefined;
}

function signal(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
