/**
 * The auto-merger policy (balancer-internals.md "AutoMergerPolicy"): finds the <shard,
 * namespace> pairs holding mergeable chunks and answers `mergeAllChunksOnShard` actions, at most
 * `maxActionsInFlight` (10) at a time. The balancer's secondary thread issues them, throttled by
 * `autoMergerThrottlingMS`, and rescans every `autoMergerIntervalSecs`.
 *
 * Mergeable: two or more contiguous chunks on one shard, none jumbo, each either never migrated
 * or migrated more than `minSnapshotHistoryWindowInSeconds` and more than
 * `transactionLifetimeLimitSeconds` ago, so that purging their history breaks no snapshot read
 * and no transaction.
 */
import type { ChunkRange } from '../ranges/chunk-range.js';
import { mergeRanges, rangesAreContiguous } from '../ranges/chunk-range.js';
import type { Chunk, ShardId } from '../routing/chunk.js';
import type { AutoMergerSettings } from './balancer-settings.js';
import type { ZoneRange } from './distribution.js';
import { sortChunks, zoneOfRange } from './distribution.js';

/** A collection as the auto-merger sees it. */
export interface AutoMergerCollection {
  readonly namespace: string;
  readonly chunks: readonly Chunk[];
  /** `configureCollectionBalancing(ns, { enableAutoMerger: false })` turns it off per collection. */
  readonly autoMergerEnabled?: boolean;
  /** The collection's zone ranges: chunks of different zones are not merged. */
  readonly zones?: readonly ZoneRange[];
}

/** Merge every mergeable run of `namespace`'s chunks on `shard`. */
export interface AutoMergeAction {
  readonly kind: 'mergeAllChunksOnShard';
  readonly namespace: string;
  readonly shard: ShardId;
}

/** A run of contiguous mergeable chunks of one shard, in key order, and the range it merges to. */
export interface MergeableRun {
  readonly shard: ShardId;
  readonly chunks: readonly Chunk[];
  readonly range: ChunkRange;
}

/**
 * True when purging `chunk`'s history breaks nothing at `nowSeconds` (cluster time seconds): it
 * is not jumbo and it was never migrated (one placement in its history; a merge restarts
 * history) or its last migration is older than both windows.
 */
export function isMergeable(chunk: Chunk, nowSeconds: number, settings: AutoMergerSettings): boolean {
  if (chunk.jumbo === true) return false;
  if (chunk.history.length <= 1) return true;
  const lastMigration = chunk.history[0]?.validAfter.t ?? 0;
  const window = Math.max(settings.minSnapshotHistoryWindowInSeconds, settings.transactionLifetimeLimitSeconds);
  return nowSeconds - lastMigration > window;
}

/**
 * Returns the runs `mergeAllChunksOnShard(namespace, shard)` merges: maximal runs of two or more
 * contiguous mergeable chunks on `shard` (or on every shard when `shard` is omitted), in key order.
 * A run never joins chunks of different zones (choice: the balancer splits chunks at zone
 * bounds, so merging across one would only be split again next round).
 */
export function findMergeableRuns(
  chunks: readonly Chunk[],
  nowSeconds: number,
  settings: AutoMergerSettings,
  shard?: ShardId,
  zones: readonly ZoneRange[] = [],
): MergeableRun[] {
  const runs: MergeableRun[] = [];
  let current: Chunk[] = [];
  const flush = (): void => {
    const first = current[0];
    if (first !== undefined && current.length >= 2)
      runs.push({ shard: first.shard, chunks: current, range: mergeRanges(current.map((c) => c.range)) });
    current = [];
  };
  for (const chunk of sortChunks(chunks)) {
    const last = current[current.length - 1];
    const fits = (shard === undefined || chunk.shard === shard) && isMergeable(chunk, nowSeconds, settings);
    const sameZone = last === undefined || zones.length === 0 || zoneOfRange(last.range, zones) === zoneOfRange(chunk.range, zones);
    if (last !== undefined && (!fits || last.shard !== chunk.shard || !rangesAreContiguous(last.range, chunk.range) || !sameZone)) flush();
    if (fits) current.push(chunk);
  }
  flush();
  return runs;
}

/**
 * Returns the next auto-merge actions: one per <shard, namespace> pair with mergeable chunks,
 * shard by shard then namespace by namespace (the reference's loop), at most
 * `settings.maxActionsInFlight - inFlight` of them.
 */
export function selectAutoMergeActions(
  collections: readonly AutoMergerCollection[],
  nowSeconds: number,
  settings: AutoMergerSettings,
  inFlight = 0,
): AutoMergeAction[] {
  const pairs = new Map<ShardId, string[]>();
  for (const collection of collections) {
    if (collection.autoMergerEnabled === false) continue;
    const shards = new Set(findMergeableRuns(collection.chunks, nowSeconds, settings, undefined, collection.zones).map((r) => r.shard));
    for (const shard of shards) pairs.set(shard, [...(pairs.get(shard) ?? []), collection.namespace]);
  }
  const actions: AutoMergeAction[] = [];
  const room = Math.max(0, settings.maxActionsInFlight - inFlight);
  for (const shard of [...pairs.keys()].sort()) {
    for (const namespace of pairs.get(shard) ?? []) {
      if (actions.length >= room) return actions;
      actions.push({ kind: 'mergeAllChunksOnShard', namespace, shard });
    }
  }
  return actions;
}

/**
 * Cuts a mergeable run into pieces whose total size stays within `maxBytes`, each of two or more
 * chunks, in key order (`sizeOf` gives each chunk's bytes). Choice where the reference is silent
 * (MongoDB 7 merges whatever is mergeable): Tessera's balancer moves whole chunks and a donor
 * refuses one over twice the max, so a merge must not build a chunk the balancer cannot move.
 */
export function capRunBySize(chunks: readonly Chunk[], sizeOf: (chunk: Chunk) => number, maxBytes: number): Chunk[][] {
  const pieces: Chunk[][] = [];
  let current: Chunk[] = [];
  let bytes = 0;
  for (const chunk of chunks) {
    const size = sizeOf(chunk);
    if (current.length > 0 && bytes + size > maxBytes) {
      if (current.length >= 2) pieces.push(current);
      current = [];
      bytes = 0;
    }
    current.push(chunk);
    bytes += size;
  }
  if (current.length >= 2) pieces.push(current);
  return pieces;
}
