/**
 * An in-memory `RangeDeletionStore` for unit tests: the `range_deletions` queue and, for the
 * batches to delete from, collection tables that hold only their documents' shard keys. Each
 * method keeps the real one's contract (a batch deletes at most `limit` keys of the range and adds
 * them to its task's count in one step; a table that is gone cannot be deleted from). The clock is
 * `Date.now`, so fake timers move the tasks' delays.
 *
 *     const store = new FakeRangeDeletionStore();
 *     store.createTable('coll_x', keys);
 *     const id = await store.recordPending({ ns, collectionUuid, min, max, minEjson, maxEjson });
 *     await store.markReady(undefined as never, id, 0);
 *     store.failNth({ method: 'deleteBatch', nth: 2 });
 *
 * Faults, on the Nth call of a method (1-based, `times` calls from it): fail before it takes
 * effect, fail after it took effect (as when the connection drops after the commit, so the caller
 * sees an error for a change that was made), or be delayed before running.
 */
import type { RangeDeletionRow, RangeDeletionStore, RangeDeletionTask } from '../../apps/shard/src/migration/range-deletion.store.js';

/** The store's public methods, as the real one declares them. */
type RangeDeletionStoreMethods = { [K in keyof RangeDeletionStore]: RangeDeletionStore[K] };
export type RangeDeletionStoreMethod = keyof RangeDeletionStore;

/** Which calls a fault or delay applies to. */
export interface StoreCallMatcher {
  method: RangeDeletionStoreMethod;
  /** The first call affected, 1-based. Default 1. */
  nth?: number;
  /** How many calls from the nth on are affected. Default 1; Infinity for all. */
  times?: number;
}

export interface StoreFault extends StoreCallMatcher {
  /** What the call throws. Default an `Error` naming the method and call. */
  error?: Error;
  /** Fail after the call took effect rather than before. Default false. */
  afterEffect?: boolean;
}

/** One call as the store saw it, with the (fake) time it started. */
export interface StoreCall {
  method: RangeDeletionStoreMethod;
  at: number;
}

interface StoredTask extends RangeDeletionTask {
  pending: boolean;
  whenToClean: number | undefined;
  deletedDocuments: number;
  createdAt: number;
  /** Orders tasks created in the same millisecond, as their insertion would. */
  sequence: number;
}

interface Rule {
  method: RangeDeletionStoreMethod;
  nth: number;
  times: number;
  seen: number;
  fault: Required<Omit<StoreFault, keyof StoreCallMatcher>> | undefined;
  delayMs: number;
}

/** Postgres orders `bytea` as `Buffer.compare` does: byte by byte, a prefix first. */
const inRange = (key: Buffer, min: Buffer, max: Buffer) => Buffer.compare(key, min) >= 0 && Buffer.compare(key, max) < 0;

export class FakeRangeDeletionStore implements RangeDeletionStoreMethods {
  readonly calls: StoreCall[] = [];
  private readonly tasks = new Map<string, StoredTask>();
  private readonly tables = new Map<string, Buffer[]>();
  private readonly rules: Rule[] = [];
  private sequence = 0;
  private nextId = 1;

  // --- the test's hands on the data ---

  /** Creates (or replaces) a collection table holding documents with these shard keys. */
  createTable(table: string, keys: readonly Buffer[]): void {
    this.tables.set(table, [...keys]);
  }

  /** Drops a collection table, as dropping the collection does. */
  dropTable(table: string): void {
    this.tables.delete(table);
  }

  /** The shard keys left in `table`, in [min, max) when given. */
  keys(table: string, min?: Buffer, max?: Buffer): Buffer[] {
    const keys = this.tables.get(table) ?? [];
    return min === undefined || max === undefined ? [...keys] : keys.filter((k) => inRange(k, min, max));
  }

  /** A task as stored, or undefined once it is gone. */
  task(id: string): Readonly<StoredTask> | undefined {
    return this.tasks.get(id);
  }

  /** The calls made to `method`. */
  callsTo(method: RangeDeletionStoreMethod): StoreCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** Makes the matching calls fail. */
  failNth(fault: StoreFault): void {
    const rule = this.rule(fault);
    rule.fault = {
      error: fault.error ?? new Error(`injected failure of ${fault.method} (call ${rule.nth})`),
      afterEffect: fault.afterEffect ?? false,
    };
  }

  /** Makes the matching calls wait `ms` (on the timers, so fake ones move it) before running. */
  delayNth(matcher: StoreCallMatcher & { ms: number }): void {
    this.rule(matcher).delayMs = matcher.ms;
  }

  // --- RangeDeletionStore ---

  recordPending(task: Omit<RangeDeletionTask, 'id'> & { id?: string }): Promise<string> {
    return this.call('recordPending', () => {
      const id = task.id ?? `00000000-0000-4000-8000-${String(this.nextId++).padStart(12, '0')}`;
      if (!this.tasks.has(id)) {
        this.tasks.set(id, {
          ...task,
          id,
          pending: true,
          whenToClean: undefined,
          deletedDocuments: 0,
          createdAt: Date.now(),
          sequence: this.sequence++,
        });
      }
      return id;
    });
  }

  markReady(_manager: unknown, id: string, delaySecs: number): Promise<void> {
    return this.call('markReady', () => {
      const task = this.tasks.get(id);
      if (task === undefined || !task.pending) return;
      task.pending = false;
      task.whenToClean = Date.now() + delaySecs * 1000;
    });
  }

  remove(id: string): Promise<void> {
    return this.call('remove', () => {
      this.tasks.delete(id);
    });
  }

  exists(id: string): Promise<boolean> {
    return this.call('exists', () => this.tasks.has(id));
  }

  overlapping(collectionUuid: string, min: Buffer, max: Buffer): Promise<Array<{ id: string; pending: boolean }>> {
    return this.call('overlapping', () =>
      [...this.tasks.values()]
        .filter((t) => t.collectionUuid === collectionUuid && Buffer.compare(t.min, max) < 0 && Buffer.compare(t.max, min) > 0)
        .map((t) => ({ id: t.id, pending: t.pending })),
    );
  }

  runNow(ids: readonly string[]): Promise<void> {
    return this.call('runNow', () => {
      const now = Date.now();
      for (const id of ids) {
        const task = this.tasks.get(id);
        if (task?.whenToClean !== undefined && task.whenToClean > now) task.whenToClean = now;
      }
    });
  }

  count(): Promise<number> {
    return this.call('count', () => this.tasks.size);
  }

  nextReady(): Promise<RangeDeletionRow | undefined> {
    return this.call('nextReady', () => {
      const now = Date.now();
      const ready = [...this.tasks.values()]
        .filter((t) => !t.pending && t.whenToClean !== undefined && t.whenToClean <= now)
        .sort((a, b) => a.whenToClean! - b.whenToClean! || a.createdAt - b.createdAt || a.sequence - b.sequence);
      return ready[0] === undefined ? undefined : rowOf(ready[0]);
    });
  }

  tableExists(table: string): Promise<boolean> {
    return this.call('tableExists', () => this.tables.has(table));
  }

  deleteBatch(task: RangeDeletionRow, table: string, limit: number): Promise<number> {
    return this.call('deleteBatch', () => {
      const keys = this.tables.get(table);
      if (keys === undefined) throw new Error(`relation "${table}" does not exist`);
      const doomed = new Set(keys.filter((k) => inRange(k, task.min, task.max)).slice(0, limit));
      this.tables.set(
        table,
        keys.filter((k) => !doomed.has(k)),
      );
      const stored = this.tasks.get(task.id);
      if (stored !== undefined) stored.deletedDocuments += doomed.size;
      return doomed.size;
    });
  }

  // --- fault injection ---

  private rule(matcher: StoreCallMatcher): Rule {
    const rule: Rule = { method: matcher.method, nth: matcher.nth ?? 1, times: matcher.times ?? 1, seen: 0, fault: undefined, delayMs: 0 };
    this.rules.push(rule);
    return rule;
  }

  /** Runs one call through the rules that match it: delays, then a fault before or after `effect`. */
  private async call<T>(method: RangeDeletionStoreMethod, effect: () => T): Promise<T> {
    this.calls.push({ method, at: Date.now() });
    const applying = this.rules.filter((rule) => {
      if (rule.method !== method) return false;
      rule.seen += 1;
      return rule.seen >= rule.nth && rule.seen < rule.nth + rule.times;
    });
    for (const rule of applying) if (rule.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, rule.delayMs));
    const fault = applying.find((rule) => rule.fault !== undefined)?.fault;
    if (fault !== undefined && !fault.afterEffect) throw fault.error;
    const result = effect();
    if (fault !== undefined) throw fault.error;
    return result;
  }
}

/** A task as `nextReady` answers it: a copy, the count as Postgres' bigint text. */
function rowOf(task: StoredTask): RangeDeletionRow {
  return {
    id: task.id,
    ns: task.ns,
    collection_uuid: task.collectionUuid,
    min: task.min,
    max: task.max,
    min_ejson: task.minEjson,
    max_ejson: task.maxEjson,
    pending: task.pending,
    deleted_documents: String(task.deletedDocuments),
  };
}
