import { describe, expect, it } from 'vitest';
import type { BalancerRoundSettings, BalancerRoundSnapshot, BalancerRoundState, RoundMigrationOutcome } from './balancer-round.policy.js';
import {
  explainIdleRound,
  followUpMigration,
  nextRoundDelayMs,
  planBalancerRound,
  planZoneBoundarySplits,
} from './balancer-round.policy.js';
import { DEFAULT_CHUNK_SELECTION_SETTINGS, DEFAULT_DEFRAGMENTATION_SETTINGS } from './balancer-settings.js';
import type { ChunkRun } from './chunk-layout.js';
import { layoutChunks, layoutKey } from './chunk-layout.js';
import type { CollectionBalanceStatus } from './chunk-selection.policy.js';
import type { CollectionDistribution, MigrationPlan, ShardStatistics } from './distribution.js';
import { rangeKey } from './distribution.js';
import { startDefragmentation } from './defragmentation.machine.js';

const MB = 1024 * 1024;
const MAX = 64 * MB;
const active = (id: string): ShardStatistics => ({ id, state: 'active', zones: [] });
const SHARDS = ['A', 'B', 'C', 'D'].map(active);
const SETTINGS: BalancerRoundSettings = {
  chunkSelection: DEFAULT_CHUNK_SELECTION_SETTINGS,
  defragmentation: DEFAULT_DEFRAGMENTATION_SETTINGS,
  migrationsThrottlingMs: 1000,
};

function collection(namespace: string, runs: ChunkRun[], extra: Partial<CollectionDistribution> = {}): CollectionDistribution {
  return { namespace, chunks: layoutChunks(runs), zones: [], maxChunkSizeBytes: MAX, ...extra };
}
/** Eight half-max chunks on A: imbalanced beyond 3 max chunk sizes. */
const loadedOnA = (ns: string): CollectionDistribution => collection(ns, [{ shard: 'A', chunks: 8, sizeBytes: MAX / 2 }]);
/** Tiny chunks alternating A, B: defragmentation's phase 2 moves them. */
const tinyAlternating = (ns: string): CollectionDistribution =>
  collection(ns, [
    { shard: 'A', chunks: 1, sizeBytes: MB },
    { shard: 'B', chunks: 1, sizeBytes: MB },
    { shard: 'A', chunks: 1, sizeBytes: MB },
  ]);

function state(overrides: Partial<BalancerRoundState> = {}): BalancerRoundState {
  return { defragmentation: new Map(), chunkCountInProgress: new Set(), underWay: [], lastMigrationEndMs: null, ...overrides };
}
const moves = (migrations: readonly MigrationPlan[]) => migrations.map((m) => `${m.namespace}:${m.from}->${m.to}:${m.reason}`);

describe('planBalancerRound', () => {
  it('balances a collection and throttles nothing before the first migration of a term', () => {
    const snapshot: BalancerRoundSnapshot = { shards: SHARDS, collections: [{ distribution: loadedOnA('db.a'), defragmenting: false }] };
    const plan = planBalancerRound(snapshot, state(), SETTINGS, 5000);
    expect(moves(plan.migrations)).toEqual(['db.a:A->B:imbalance']);
    expect(plan.throttleMs).toBe(0);
    expect(plan.wakeSecondary).toBe(false);
  });

  it.each([
    { lastMigrationEndMs: 4800, nowMs: 5000, throttleMs: 800 },
    { lastMigrationEndMs: 3000, nowMs: 5000, throttleMs: 0 },
  ])('sleeps what is left of the throttle: ended at $lastMigrationEndMs, now $nowMs, sleeps $throttleMs', (c) => {
    const snapshot: BalancerRoundSnapshot = { shards: SHARDS, collections: [{ distribution: loadedOnA('db.a'), defragmenting: false }] };
    expect(planBalancerRound(snapshot, state({ lastMigrationEndMs: c.lastMigrationEndMs }), SETTINGS, c.nowMs).throttleMs).toBe(
      c.throttleMs,
    );
  });

  it("issues defragmentation's migrations first, leaves its collection to it, and keeps their shards from the chunk selection policy", () => {
    const snapshot: BalancerRoundSnapshot = {
      shards: SHARDS,
      collections: [
        { distribution: tinyAlternating('db.defrag'), defragmenting: true },
        { distribution: loadedOnA('db.a'), defragmenting: false },
      ],
    };
    // Phase 2 with every size measured: each 1 MiB chunk is small and moves to a neighbour's shard.
    const sizes = Object.fromEntries(tinyAlternating('db.defrag').chunks.map((c) => [rangeKey(c.range), MB]));
    const measured = { ...startDefragmentation('db.defrag'), phase: 'moveAndMergeChunks' as const, estimates: sizes };
    const plan = planBalancerRound(snapshot, state({ defragmentation: new Map([['db.defrag', measured]]) }), SETTINGS, 0);
    expect(plan.statuses.map((s) => [s.namespace, s.firstComplianceViolation])).toEqual([
      ['db.defrag', 'defragmentingChunks'],
      ['db.a', 'chunksImbalance'],
    ]);
    expect(plan.defragmentation.map((s) => s.namespace)).toEqual(['db.defrag']);
    expect(plan.wakeSecondary).toBe(true);
    // A and B are defragmentation's for the round, so db.a's donor A gives nothing this round.
    expect(moves(plan.migrations)).toEqual(['db.defrag:A->B:defragmentation']);
    expect(plan.defragmentation[0]?.inFlight).toHaveLength(1);
  });

  it('never gives a shard busy with a top-chunk move a migration', () => {
    const snapshot: BalancerRoundSnapshot = { shards: SHARDS, collections: [{ distribution: loadedOnA('db.a'), defragmenting: false }] };
    expect(
      moves(
        planBalancerRound(
          snapshot,
          state({ underWay: [{ namespace: 'db.other', range: { min: layoutKey(0), max: layoutKey(1) }, from: 'B', to: 'Z' }] }),
          SETTINGS,
          0,
        ).migrations,
      ),
    ).toEqual(['db.a:A->C:imbalance']);
  });

  it('leaves a collection with balancing disabled alone, and carries chunkCountInProgress per collection', () => {
    const snapshot: BalancerRoundSnapshot = {
      shards: SHARDS,
      collections: [{ distribution: { ...loadedOnA('db.off'), balancingEnabled: false }, defragmenting: false }],
    };
    const plan = planBalancerRound(snapshot, state({ chunkCountInProgress: new Set(['db.gone', 'db.off']) }), SETTINGS, 0);
    expect(plan.migrations).toEqual([]);
    expect(plan.statuses).toEqual([]);
    expect([...plan.chunkCountInProgress]).toEqual(['db.gone', 'db.off']);
  });
});

describe('planZoneBoundarySplits', () => {
  it('splits every chunk of every collection that straddles a zone bound', () => {
    const zoned = collection('db.z', [{ shard: 'A', chunks: 4, sizeBytes: MB }], {
      zones: [{ zone: 'EU', range: { min: [15], max: [25] } }],
    });
    const splits = planZoneBoundarySplits({ shards: SHARDS, collections: [{ distribution: zoned, defragmenting: false }] });
    expect(splits.map((s) => [s.range.min, s.splitPoints])).toEqual([
      [layoutKey(1), [[15]]],
      [layoutKey(2), [[25]]],
    ]);
  });
});

describe('followUpMigration', () => {
  const plan = (reason: MigrationPlan['reason']): MigrationPlan => ({
    namespace: 'db.a',
    range: { min: layoutKey(1), max: layoutKey(2) },
    from: 'A',
    to: 'B',
    reason,
  });
  const failed = (code: string, retryable = false): RoundMigrationOutcome => ({ ok: false, code, retryable, error: code });
  it.each([
    { reason: 'imbalance', outcome: { ok: true }, splitOrMarkJumbo: false, skipCollection: false, defragmentation: undefined },
    { reason: 'imbalance', outcome: failed('CHUNK_TOO_BIG'), splitOrMarkJumbo: true, skipCollection: false, defragmentation: undefined },
    {
      reason: 'drain',
      outcome: failed('CONFLICTING_OPERATION'),
      splitOrMarkJumbo: false,
      skipCollection: true,
      defragmentation: undefined,
    },
    { reason: 'defragmentation', outcome: { ok: true }, splitOrMarkJumbo: false, skipCollection: false, defragmentation: { ok: true } },
    {
      reason: 'defragmentation',
      outcome: failed('SHARD_NOT_REACHABLE', true),
      splitOrMarkJumbo: false,
      skipCollection: false,
      defragmentation: { ok: false, retryable: true, error: 'SHARD_NOT_REACHABLE' },
    },
  ] as const)('after a $reason migration that ended $outcome.code: split $splitOrMarkJumbo, skip $skipCollection', (c) => {
    const followUp = followUpMigration(plan(c.reason), c.outcome as RoundMigrationOutcome);
    expect(followUp.splitOrMarkJumbo).toBe(c.splitOrMarkJumbo);
    expect(followUp.skipCollection).toBe(c.skipCollection);
    expect(followUp.defragmentation?.outcome).toEqual(c.defragmentation);
  });
});

describe('the next round and the idle story', () => {
  it.each([
    { issuedMigrations: true, woken: false, delay: 0 },
    { issuedMigrations: false, woken: true, delay: 0 },
    { issuedMigrations: false, woken: false, delay: 10_000 },
  ])('issued $issuedMigrations, woken $woken: the next round in $delay ms', (c) => {
    expect(nextRoundDelayMs(c, 10_000)).toBe(c.delay);
  });

  const status = (compliant: boolean, violation?: CollectionBalanceStatus['firstComplianceViolation']): CollectionBalanceStatus => ({
    namespace: 'db.a',
    balancerCompliant: compliant,
    ...(violation === undefined ? {} : { firstComplianceViolation: violation }),
    jumboChunksSkipped: 0,
    chunkCountBalancingInProgress: false,
  });
  it.each([
    { statuses: [status(true)], collections: 1, interrupted: true, why: 'woken before its migrations' },
    { statuses: [], collections: 0, interrupted: false, why: 'no sharded collection has balancing enabled' },
    { statuses: [status(true)], collections: 1, interrupted: false, why: 'every collection is balanced' },
    { statuses: [status(false, 'defragmentingChunks')], collections: 1, interrupted: false, why: 'defragmentation has no migration' },
    { statuses: [status(false, 'chunksImbalance')], collections: 1, interrupted: false, why: 'no migration possible' },
  ])('says "$why"', (c) => {
    expect(explainIdleRound(c.statuses, c.collections, c.interrupted)).toContain(c.why);
  });
});
