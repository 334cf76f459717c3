import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TesseraError } from '@tessera/core';
import { Failpoints } from '@tessera/platform';
import { FakeRangeDeletionStore, type StoreCallMatcher } from '../../../../test/fakes/fake-range-deletion-store.js';
import { tableName } from '../collections/collection-storage.service.js';
import type { ShardSettings } from '../shard.settings.js';
import type { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import type { MigrationMetrics } from './migration-metrics.js';
import type { MigrationReport, MigrationReporter } from './migration-reporter.js';
import { RangeDeleterService } from './range-deleter.service.js';
import type { RangeDeletionStore } from './range-deletion.store.js';
import { testWriteTimes } from '../../../../test/fakes/write-times.js';

// Fake timers replace the global timers but not the binding a module imported from
// `node:timers/promises`; route that one to the global so the deleter's waits run on the fake clock.
vi.mock('node:timers/promises', async (importOriginal) => ({
  ...(await importOriginal<typeof import('node:timers/promises')>()),
  setTimeout: <T>(ms: number, value?: T) => new Promise<T | undefined>((resolve) => setTimeout(() => resolve(value), ms)),
}));

const NS = 'db.c';
const COLLECTION = '00000000-0000-4000-8000-0000000000cc';
const TABLE = tableName(COLLECTION);
const BATCH = 3;
/** The loop's wait after a failed round. */
const RETRY_MS = 1_000;

/** A shard key whose bytes order as the number does. */
function key(n: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(n);
  return bytes;
}

/** The collection holds keys 0..29; the task deletes [10, 20): ten documents, four batches of three. */
const ALL = Array.from({ length: 30 }, (_, n) => key(n));
const MIN = key(10);
const MAX = key(20);
const IN_RANGE = 10;

/** The queries under way on the shard: `waitForViewsWithout` waits while one is held, or fails as told. */
class FakeViews {
  readonly waits: number[] = [];
  private held: Promise<void> | undefined;
  private failures = 0;

  /** A query that still sees the range begins; call the answer when it ends. */
  hold(): () => void {
    let release!: () => void;
    this.held = new Promise((resolve) => (release = resolve));
    return () => {
      this.held = undefined;
      release();
    };
  }

  failNext(times = 1): void {
    this.failures = times;
  }

  async waitForViewsWithout(): Promise<void> {
    this.waits.push(Date.now());
    if (this.failures > 0) {
      this.failures -= 1;
      throw new Error('injected failure of waitForViewsWithout');
    }
    await this.held;
  }
}

/** The two metrics the range deleter writes. */
class FakeMetrics {
  deleted = 0;
  readonly pending: number[] = [];
  readonly documentsDeleted = { inc: (n = 1) => void (this.deleted += n) };
  readonly rangeDeletionsPending = { set: (n: number) => void this.pending.push(n) };
}

interface LogLine {
  level: number;
  time: number;
  msg: string;
}

interface Harness {
  deleter: RangeDeleterService;
  views: FakeViews;
  metrics: FakeMetrics;
  reports: MigrationReport[];
  logs: LogLine[];
}

interface DeleterOptions {
  failpoints?: string;
  batchDelayMs?: number;
}

/** The deleters a test made, stopped after it. */
const made: Harness[] = [];

/** A started range deleter over `store`, as a shard's boot makes it. */
function startDeleter(store: FakeRangeDeletionStore, options: DeleterOptions = {}): Harness {
  const h = buildDeleter(store, options);
  h.deleter.onApplicationBootstrap();
  return h;
}

/** A range deleter over `store`, not started. */
function buildDeleter(store: FakeRangeDeletionStore, options: DeleterOptions = {}): Harness {
  const logs: LogLine[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line) as LogLine) });
  const settings = {
    TESSERA_RANGE_DELETER_BATCH_SIZE: BATCH,
    TESSERA_RANGE_DELETER_BATCH_DELAY_MS: options.batchDelayMs ?? 1,
    TESSERA_ORPHAN_CLEANUP_DELAY_SECS: 900,
    TESSERA_FAILPOINTS: options.failpoints ?? '',
  } as ShardSettings;
  const views = new FakeViews();
  const metrics = new FakeMetrics();
  const reports: MigrationReport[] = [];
  const reporter = { report: (entry: MigrationReport) => reports.push(entry) } as unknown as MigrationReporter;
  const deleter = new RangeDeleterService(
    store as unknown as RangeDeletionStore,
    views as unknown as ShardingRuntime,
    metrics as unknown as MigrationMetrics,
    reporter,
    new Failpoints(settings, logger),
    testWriteTimes(),
    settings,
    logger,
  );
  const h = { deleter, views, metrics, reports, logs };
  made.push(h);
  return h;
}

/** A store whose collection holds `ALL`, with one task over [MIN, MAX), ready after `delaySecs` unless `pending`. */
async function storeWithTask(
  options: { delaySecs?: number; pending?: boolean } = {},
): Promise<{ store: FakeRangeDeletionStore; id: string }> {
  const store = new FakeRangeDeletionStore();
  store.createTable(TABLE, ALL);
  const id = await recordTask(store, MIN, MAX, options);
  return { store, id };
}

async function recordTask(
  store: FakeRangeDeletionStore,
  min: Buffer,
  max: Buffer,
  options: { delaySecs?: number; pending?: boolean } = {},
): Promise<string> {
  const id = await store.recordPending({
    ns: NS,
    collectionUuid: COLLECTION,
    min,
    max,
    minEjson: JSON.stringify({ x: min.readUInt32BE() }),
    maxEjson: JSON.stringify({ x: max.readUInt32BE() }),
  });
  if (!options.pending) await store.markReady(undefined, id, options.delaySecs ?? 0);
  return id;
}

/** Moves the fake clock in steps of `stepMs` until `condition` holds; fails naming `what` past `limitMs`. */
async function until(condition: () => boolean, what: string, { stepMs = 10, limitMs = 30_000 } = {}): Promise<void> {
  for (let waited = 0; !condition(); waited += stepMs) {
    if (waited > limitMs) throw new Error(`still waiting for ${what} after ${limitMs} ms`);
    await vi.advanceTimersByTimeAsync(stepMs);
  }
}

/** Stops the deleter as a shard's shutdown does, moving the clock while it finishes what it was doing. */
async function stop(h: Harness): Promise<void> {
  let stopped = false;
  const stopping = h.deleter.onApplicationShutdown().then(() => (stopped = true));
  await until(() => stopped, 'the deleter to stop');
  await stopping;
}

/** What a finished task must leave: its range empty, the rest untouched, the task gone and reported once. */
function expectFinished(store: FakeRangeDeletionStore, h: Harness, id: string): void {
  expect(store.keys(TABLE, MIN, MAX)).toEqual([]);
  expect(store.keys(TABLE)).toHaveLength(ALL.length - IN_RANGE);
  expect(store.task(id)).toBeUndefined();
  expect(h.reports).toEqual([
    { what: 'rangeDeletion', ns: NS, details: expect.objectContaining({ min: { x: 10 }, max: { x: 20 }, documentsDeleted: IN_RANGE }) },
  ]);
  expect(h.metrics.pending.at(-1)).toBe(0);
}

const errorsLogged = (h: Harness) => h.logs.filter((l) => l.level >= 50);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(async () => {
  for (const h of made.splice(0)) await stop(h);
  vi.useRealTimers();
});

describe('the range deleter', () => {
  it('deletes a ready range in batches, then removes and reports its task', async () => {
    const { store, id } = await storeWithTask();
    const h = startDeleter(store);
    let settled = false;
    void h.deleter.waitForTask(id).then(() => (settled = true));
    await until(() => settled, 'the task to finish');
    expectFinished(store, h, id);
    expect(store.callsTo('deleteBatch')).toHaveLength(Math.ceil(IN_RANGE / BATCH));
    expect(h.metrics.deleted).toBe(IN_RANGE);
    expect(errorsLogged(h)).toEqual([]);
  });

  it('waits for the queries that still see the range before deleting any of it', async () => {
    const { store, id } = await storeWithTask();
    const h = startDeleter(store);
    const release = h.views.hold();
    await until(() => h.views.waits.length > 0, 'the deleter to wait for the queries');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(store.callsTo('deleteBatch')).toEqual([]);
    expect(store.keys(TABLE, MIN, MAX)).toHaveLength(IN_RANGE);
    release();
    await until(() => store.task(id) === undefined, 'the task to finish');
    expectFinished(store, h, id);
  });

  // One failure at each step of a task: the loop logs it, retries after its delay, and the retry
  // finishes the task with every document of the range deleted once and counted once in the
  // report (the task's persisted count). The metric counts the batches this process saw answered,
  // so it misses one whose answer was lost.
  it.each<{ step: string; inject: (store: FakeRangeDeletionStore, views: FakeViews) => void; failed: string; counted?: number }>([
    { step: 'counting the tasks for the gauge', inject: (store) => store.failNth({ method: 'count' }), failed: 'count' },
    {
      step: 'counting the tasks right after the removal',
      inject: (store) => store.failNth({ method: 'count', nth: 2 }),
      failed: 'count',
    },
    { step: 'reading the next ready task', inject: (store) => store.failNth({ method: 'nextReady' }), failed: 'nextReady' },
    {
      step: 'waiting for the queries that still see the range',
      inject: (_store, views) => views.failNext(),
      failed: 'waitForViewsWithout',
    },
    { step: 'checking that the table is still there', inject: (store) => store.failNth({ method: 'tableExists' }), failed: 'tableExists' },
    { step: 'the first batch', inject: (store) => store.failNth({ method: 'deleteBatch', nth: 1 }), failed: 'deleteBatch' },
    { step: 'a middle batch', inject: (store) => store.failNth({ method: 'deleteBatch', nth: 3 }), failed: 'deleteBatch' },
    {
      step: 'a batch that committed but whose answer was lost',
      inject: (store) => store.failNth({ method: 'deleteBatch', nth: 2, afterEffect: true }),
      failed: 'deleteBatch',
      counted: IN_RANGE - BATCH,
    },
    { step: 'removing the finished task', inject: (store) => store.failNth({ method: 'remove' }), failed: 'remove' },
  ])('retries after a failure in $step and finishes the task', async ({ inject, failed, counted = IN_RANGE }) => {
    const { store, id } = await storeWithTask();
    const h = buildDeleter(store);
    inject(store, h.views);
    h.deleter.onApplicationBootstrap();
    let settled = false;
    let goneWhenSettled = false;
    void h.deleter.waitForTask(id).then(() => {
      settled = true;
      goneWhenSettled = store.task(id) === undefined;
    });
    await until(() => settled, 'the task to finish');
    expect(goneWhenSettled).toBe(true);
    // A failure after the removal is retried too: let that round run before looking.
    await vi.advanceTimersByTimeAsync(RETRY_MS);

    expectFinished(store, h, id);
    expect(h.metrics.deleted).toBe(counted);
    const errors = errorsLogged(h);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toMatch(new RegExp(`^range deletion failed: injected failure of ${failed}\\b.*; will retry$`));
    const failedAt = errors[0]!.time;
    const retriedAt = [...store.calls.map((c) => c.at), ...h.views.waits].filter((at) => at > failedAt).sort((a, b) => a - b)[0];
    expect(retriedAt! - failedAt).toBeGreaterThanOrEqual(RETRY_MS);
  });

  it.each<{ when: string; batchesBefore: number }>([
    { when: 'before the task ran', batchesBefore: 0 },
    { when: 'between two batches', batchesBefore: 1 },
  ])('removes the task when the collection was dropped $when', async ({ batchesBefore }) => {
    const { store, id } = await storeWithTask();
    if (batchesBefore === 0) store.dropTable(TABLE);
    const h = startDeleter(store, { failpoints: `rangeDeleter.firstBatch@${NS}=100` });
    if (batchesBefore > 0) {
      await until(() => store.callsTo('deleteBatch').length === batchesBefore, 'the first batch');
      store.dropTable(TABLE);
    }
    await until(() => store.task(id) === undefined, 'the task to be removed');
    expect(store.callsTo('deleteBatch')).toHaveLength(batchesBefore);
    expect(h.reports).toEqual([
      { what: 'rangeDeletion', ns: NS, details: expect.objectContaining({ documentsDeleted: batchesBefore * BATCH }) },
    ]);
    expect(errorsLogged(h)).toEqual([]);
  });

  it('answers a waiter when the task was removed though the removal reported an error', async () => {
    const { store, id } = await storeWithTask();
    store.failNth({ method: 'remove', afterEffect: true });
    const h = startDeleter(store);
    let settled = false;
    void h.deleter.waitForTask(id).then(() => (settled = true));
    await until(() => settled, 'the waiter to be answered');
    expect(store.task(id)).toBeUndefined();
  });

  it('answers a waiter only once its task is gone, and at once for a task already gone', async () => {
    const { store, id } = await storeWithTask({ pending: true });
    const h = startDeleter(store);
    let settled = false;
    void h.deleter.waitForTask(id).then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(5_000);
    expect(settled).toBe(false);
    await store.remove(id);
    await until(() => settled, 'the waiter to be answered');
    await expect(h.deleter.waitForTask('00000000-0000-4000-8000-00000000dead')).resolves.toBeUndefined();
  });

  it.each<{ when: string; options: DeleterOptions; slow?: StoreCallMatcher & { ms: number } }>([
    { when: 'paused after its first batch', options: { failpoints: `rangeDeleter.firstBatch@${NS}=2000` } },
    { when: 'during a slow batch', options: { batchDelayMs: 0 }, slow: { method: 'deleteBatch', nth: 2, ms: 2_000 } },
  ])('resumes a task stopped $when in the next process and deletes nothing twice', async ({ options, slow }) => {
    const { store, id } = await storeWithTask();
    if (slow !== undefined) store.delayNth(slow);
    const first = startDeleter(store, options);
    await until(() => store.callsTo('deleteBatch').length === (slow?.nth ?? 1), 'the task to be under way');
    await stop(first);
    expect(store.task(id)).toBeDefined();
    expect(first.reports).toEqual([]);
    const left = store.keys(TABLE, MIN, MAX).length;
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThan(IN_RANGE);

    const second = startDeleter(store, options);
    await until(() => store.task(id) === undefined, 'the task to finish in the next process');
    expectFinished(store, second, id);
    expect(first.metrics.deleted + second.metrics.deleted).toBe(IN_RANGE);
  });

  it('never runs a task that awaits its migration decision', async () => {
    const { store, id } = await storeWithTask({ pending: true });
    const h = startDeleter(store);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(h.views.waits).toEqual([]);
    expect(store.callsTo('deleteBatch')).toEqual([]);
    expect(store.keys(TABLE, MIN, MAX)).toHaveLength(IN_RANGE);
    expect(h.metrics.pending.at(-1)).toBe(1);
    await store.markReady(undefined, id, 0);
    h.deleter.poke();
    await until(() => store.task(id) === undefined, 'the task to finish once decided');
    expectFinished(store, h, id);
  });

  it('runs one task after another, the one whose delay ended first first', async () => {
    const store = new FakeRangeDeletionStore();
    store.createTable(TABLE, ALL);
    const later = await recordTask(store, key(0), key(5), { delaySecs: 2 });
    const sooner = await recordTask(store, key(20), key(25), { delaySecs: 1 });
    const h = startDeleter(store);
    await until(() => store.task(later) === undefined, 'both tasks to finish');
    expect(h.reports.map((r) => r.details.min)).toEqual([{ x: 20 }, { x: 0 }]);
    expect(store.task(sooner)).toBeUndefined();
  });
});

describe('waiting for overlapping range deletions (a recipient before cloning)', () => {
  it('runs an overlapping task still in its cleanup delay now and returns once it is done', async () => {
    const { store, id } = await storeWithTask({ delaySecs: 900 });
    const h = startDeleter(store);
    let done = false;
    void h.deleter.waitForOverlapping(COLLECTION, key(15), key(40)).then(() => (done = true));
    await until(() => done, 'the overlapping task to be run', { limitMs: 5_000 });
    expect(store.callsTo('runNow')).toHaveLength(1);
    expectFinished(store, h, id);
  });

  it('does not wait for tasks of other ranges or collections', async () => {
    const { store } = await storeWithTask({ pending: true });
    const h = startDeleter(store);
    await expect(h.deleter.waitForOverlapping(COLLECTION, MAX, key(40))).resolves.toBeUndefined();
    await expect(h.deleter.waitForOverlapping(COLLECTION, key(0), MIN)).resolves.toBeUndefined();
    await expect(h.deleter.waitForOverlapping('00000000-0000-4000-8000-0000000000dd', MIN, MAX)).resolves.toBeUndefined();
  });

  it.each<{ task: string; pending: boolean; inject?: (store: FakeRangeDeletionStore) => void; says: RegExp }>([
    { task: 'awaits its migration decision', pending: true, says: /waiting for its migration decision/ },
    {
      task: 'keeps failing',
      pending: false,
      inject: (store) => store.failNth({ method: 'deleteBatch', times: Infinity }),
      says: /still running/,
    },
  ])('refuses with CONFLICTING_OPERATION after a minute while an overlapping task $task', async ({ pending, inject, says }) => {
    const { store, id } = await storeWithTask({ pending });
    inject?.(store);
    const h = startDeleter(store);
    const started = Date.now();
    let refusal: unknown;
    void h.deleter.waitForOverlapping(COLLECTION, MIN, MAX).catch((e: unknown) => (refusal = e));
    await vi.advanceTimersByTimeAsync(59_000);
    expect(refusal).toBeUndefined();
    await until(() => refusal !== undefined, 'the refusal', { stepMs: 100, limitMs: 5_000 });
    expect(refusal).toBeInstanceOf(TesseraError);
    expect(refusal).toMatchObject({ code: 'CONFLICTING_OPERATION', details: { collectionUuid: COLLECTION, tasks: [id] } });
    expect((refusal as TesseraError).message).toMatch(says);
    expect(Date.now() - started).toBeGreaterThanOrEqual(60_000);
    expect(store.task(id)).toBeDefined();
  });
});
