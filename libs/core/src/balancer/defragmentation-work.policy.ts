/**
 * The work each defragmentation phase wants, derived from the chunks now and the sizes known
 * (the machine in `defragmentation.machine.ts` decides what to issue of it): merges of runs of
 * contiguous chunks on one shard, data sizes of chunks of unknown size, and phase 2's moves of
 * small chunks to a neighbour's shard.
 */
import { mergeRanges, rangesAreContiguous } from '../ranges/chunk-range.js';
import type { Chunk, ShardId } from '../routing/chunk.js';
import type { DefragmentationSettings } from './balancer-settings.js';
import type { DefragmentationAction, DefragmentationSnapshot, DefragmentationState } from './defragmentation.machine.js';
import type { SizedChunk } from './distribution.js';
import { rangeKey, sortChunks } from './distribution.js';

/** Merges and data sizes the current phase wants, in key order. */
export function secondaryWork(
  state: DefragmentationState,
  snapshot: DefragmentationSnapshot,
  settings: DefragmentationSettings,
): DefragmentationAction[] {
  const chunks = sortChunks(snapshot.chunks);
  const ns = state.namespace;
  const sizeOf = (c: Chunk): number | undefined => state.estimates[rangeKey(c.range)];
  const max = snapshot.maxChunkSizeBytes;
  switch (state.phase) {
    case 'mergeAndMeasureChunks': {
      const actions: DefragmentationAction[] = [];
      for (const run of sameShardRuns(chunks, (c) => sizeOf(c) ?? (c as SizedChunk).estimatedSizeBytes, max)) {
        const first = run[0] as Chunk;
        if (run.length >= 2) actions.push(mergeAction(ns, run));
        else if (sizeOf(first) === undefined) actions.push({ kind: 'dataSize', namespace: ns, shard: first.shard, range: first.range });
      }
      return actions;
    }
    case 'moveAndMergeChunks': {
      // Merge a small chunk with a neighbour it now shares a shard with; measure unknown chunks.
      const small = smallLimit(snapshot, settings);
      const actions: DefragmentationAction[] = [];
      for (let i = 0; i < chunks.length; i++) {
        const c = chunks[i] as Chunk;
        const size = sizeOf(c);
        if (size === undefined) {
          actions.push({ kind: 'dataSize', namespace: ns, shard: c.shard, range: c.range });
          continue;
        }
        const next = chunks[i + 1];
        const nextSize = next && sizeOf(next);
        if (next === undefined || nextSize === undefined || next.shard !== c.shard || !rangesAreContiguous(c.range, next.range)) continue;
        if (c.jumbo === true || next.jumbo === true) continue;
        if ((size < small || nextSize < small) && size + nextSize <= max) {
          actions.push(mergeAction(ns, [c, next]));
          i++;
        }
      }
      return actions;
    }
    case 'mergeChunks':
      return sameShardRuns(chunks, (c) => sizeOf(c) ?? (c as SizedChunk).estimatedSizeBytes, max)
        .filter((run) => run.length >= 2)
        .map((run) => mergeAction(ns, run));
    case 'finished':
      return [];
  }
}

/**
 * Phase 2 migrations: each small chunk goes to the shard of a neighbour. Score per the
 * reference, most important first: the recipient is the chunk's own shard (a merge, handled
 * by `secondaryWork`, so never a migration here) 8; the chunk is smaller than that neighbour 4;
 * the merged chunk is no longer small 2; the recipient holds less data than the other
 * candidate 1. Ties go to the left neighbour.
 */
export function migrationWork(
  state: DefragmentationState,
  snapshot: DefragmentationSnapshot,
  settings: DefragmentationSettings,
): DefragmentationAction[] {
  if (state.phase !== 'moveAndMergeChunks') return [];
  const chunks = sortChunks(snapshot.chunks);
  const small = smallLimit(snapshot, settings);
  const sizeOf = (c: Chunk): number | undefined => state.estimates[rangeKey(c.range)];
  const shardBytes = new Map<ShardId, number>();
  for (const c of chunks) shardBytes.set(c.shard, (shardBytes.get(c.shard) ?? 0) + (sizeOf(c) ?? 0));
  const actions: DefragmentationAction[] = [];
  for (let i = 0; i < chunks.length; i++) {
    const c = chunks[i] as Chunk;
    const size = sizeOf(c);
    if (size === undefined || size >= small || c.jumbo === true) continue;
    const neighbours = [chunks[i - 1], chunks[i + 1]].filter(
      (n): n is Chunk =>
        n !== undefined &&
        n.jumbo !== true &&
        sizeOf(n) !== undefined &&
        size + (sizeOf(n) as number) <= snapshot.maxChunkSizeBytes &&
        (rangesAreContiguous(n.range, c.range) || rangesAreContiguous(c.range, n.range)),
    );
    if (neighbours.some((n) => n.shard === c.shard)) continue; // a merge, not a move
    let best: { shard: ShardId; score: number } | undefined;
    for (const n of neighbours) {
      const other = neighbours.find((m) => m !== n);
      const nSize = sizeOf(n) as number;
      const score =
        (size < nSize ? 4 : 0) +
        (size + nSize >= small ? 2 : 0) +
        (other !== undefined && (shardBytes.get(n.shard) ?? 0) < (shardBytes.get(other.shard) ?? 0) ? 1 : 0);
      if (best === undefined || score > best.score) best = { shard: n.shard, score };
    }
    if (best !== undefined) actions.push({ kind: 'migrate', namespace: state.namespace, shard: c.shard, to: best.shard, range: c.range });
  }
  return actions;
}

function smallLimit(snapshot: DefragmentationSnapshot, settings: DefragmentationSettings): number {
  return settings.smallChunkFraction * snapshot.maxChunkSizeBytes;
}

/**
 * Runs of contiguous chunks on one shard, jumbo chunks alone, each run cut before its known size
 * would pass `maxBytes` (unknown sizes count 0).
 */
function sameShardRuns(sorted: readonly Chunk[], sizeOf: (c: Chunk) => number | undefined, maxBytes: number): Chunk[][] {
  const runs: Chunk[][] = [];
  let runBytes = 0;
  for (const c of sorted) {
    const run = runs[runs.length - 1];
    const last = run?.[run.length - 1];
    const bytes = sizeOf(c) ?? 0;
    const joins =
      run &&
      last &&
      last.shard === c.shard &&
      last.jumbo !== true &&
      c.jumbo !== true &&
      rangesAreContiguous(last.range, c.range) &&
      runBytes + bytes <= maxBytes;
    if (joins) {
      run.push(c);
      runBytes += bytes;
    } else {
      runs.push([c]);
      runBytes = bytes;
    }
  }
  return runs;
}

function mergeAction(namespace: string, run: readonly Chunk[]): DefragmentationAction {
  const parts = run.map((c) => c.range);
  return { kind: 'merge', namespace, shard: (run[0] as Chunk).shard, parts, range: mergeRanges(parts) };
}
