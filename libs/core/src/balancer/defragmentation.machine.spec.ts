import { describe, expect, it } from 'vitest';
import { mergeRanges, rangesEqual } from '../ranges/chunk-range.js';
import { DEFAULT_DEFRAGMENTATION_SETTINGS } from './balancer-settings.js';
import type { ChunkRun } from './chunk-layout.js';
import { layoutChunks, layoutKey } from './chunk-layout.js';
import type { DefragmentationAction, DefragmentationState } from './defragmentation.machine.js';
import {
  nextDefragmentationActions,
  nextDefragmentationMigrations,
  onDefragmentationOutcome,
  startDefragmentation,
} from './defragmentation.machine.js';
import type { SizedChunk } from './distribution.js';
import { rangeKey, sortChunks } from './distribution.js';

const MB = 1024 * 1024;
const MAX = 100 * MB; // small chunks are under 25 MB
const settings = DEFAULT_DEFRAGMENTATION_SETTINGS;
const NS = 'db.coll';
const r = (shard: string, chunks: number, sizeMB: number): ChunkRun => ({ shard, chunks, sizeBytes: sizeMB * MB });
const describeAction = (a: DefragmentationAction) =>
  a.kind === 'migrate' ? `migrate ${rangeKey(a.range)} ${a.shard}->${a.to}` : `${a.kind} ${a.shard} ${rangeKey(a.range)}`;

/** Applies a successful action to the chunks; a chunk's `estimatedSizeBytes` is its true size. */
function apply(chunks: SizedChunk[], action: DefragmentationAction): SizedChunk[] {
  switch (action.kind) {
    case 'dataSize':
      return chunks;
    case 'merge': {
      const parts = chunks.filter((c) => action.parts.some((p) => rangesEqual(p, c.range)));
      const merged: SizedChunk = {
        ...(parts[0] as SizedChunk),
        range: mergeRanges(parts.map((c) => c.range)),
        estimatedSizeBytes: parts.reduce((n, c) => n + (c.estimatedSizeBytes ?? 0), 0),
      };
      return sortChunks([...chunks.filter((c) => !parts.includes(c)), merged]);
    }
    case 'migrate':
      return chunks.map((c) => (rangesEqual(c.range, action.range) ? { ...c, shard: action.to } : c));
  }
}
const trueSize = (chunks: SizedChunk[], a: DefragmentationAction) => chunks.find((c) => rangesEqual(c.range, a.range))?.estimatedSizeBytes;

/** Runs the machine to the end, every action succeeding. Returns the chunks, the state and a log. */
function runToEnd(initial: SizedChunk[]) {
  let chunks = initial;
  let state: DefragmentationState = startDefragmentation(NS);
  const log: string[] = [];
  for (let step = 0; step < 10_000 && state.phase !== 'finished'; step++) {
    const snapshot = { chunks, maxChunkSizeBytes: MAX };
    const m = nextDefragmentationMigrations(state, snapshot, settings);
    const s = nextDefragmentationActions(m.state, snapshot, settings);
    state = s.state;
    const issued = [...m.state.inFlight.filter((a) => a.kind === 'migrate'), ...s.actions];
    for (const a of issued) {
      log.push(`${state.phase}: ${describeAction(a)}`);
      const size = trueSize(chunks, a);
      chunks = apply(chunks, a);
      state = onDefragmentationOutcome(
        state,
        a,
        a.kind === 'dataSize' ? { ok: true, ...(size === undefined ? {} : { dataSizeBytes: size }) } : { ok: true },
      );
    }
  }
  return { chunks, state, log };
}

describe('defragmentation phase 1 (merge and measure)', () => {
  it('merges each run of contiguous chunks on a shard and measures the lone chunks', () => {
    const chunks = layoutChunks([r('A', 3, 1), r('B', 1, 1), r('A', 2, 1)]);
    const { actions, state } = nextDefragmentationActions(startDefragmentation(NS), { chunks, maxChunkSizeBytes: MAX }, settings);
    expect(state.phase).toBe('mergeAndMeasureChunks');
    expect(actions.map((a) => `${a.kind} ${a.shard}`)).toEqual(['merge A', 'dataSize B', 'merge A']);
    expect(actions[0]?.range.max).toEqual(layoutKey(3));
    expect(state.inFlight).toHaveLength(3);
  });

  it('issues no second action for chunks an action in flight already covers', () => {
    const chunks = layoutChunks([r('A', 3, 1), r('B', 1, 1)]);
    const first = nextDefragmentationActions(startDefragmentation(NS), { chunks, maxChunkSizeBytes: MAX }, settings);
    expect(nextDefragmentationActions(first.state, { chunks, maxChunkSizeBytes: MAX }, settings).actions).toEqual([]);
  });

  it('issues at most the room left of the secondary thread', () => {
    const chunks = layoutChunks([r('A', 1, 1), r('B', 1, 1), r('A', 1, 1), r('B', 1, 1)]);
    expect(nextDefragmentationActions(startDefragmentation(NS), { chunks, maxChunkSizeBytes: MAX }, settings, 3).actions).toHaveLength(3);
  });

  it('moves on to phase 2 once every chunk is merged and measured', () => {
    const chunks = layoutChunks([r('A', 1, 30), r('B', 1, 30)]);
    let state = startDefragmentation(NS);
    const first = nextDefragmentationActions(state, { chunks, maxChunkSizeBytes: MAX }, settings);
    state = first.actions.reduce((s, a) => onDefragmentationOutcome(s, a, { ok: true, dataSizeBytes: 30 * MB }), first.state);
    const next = nextDefragmentationActions(state, { chunks, maxChunkSizeBytes: MAX }, settings);
    // No small chunk: phase 2 has nothing to do, phase 3 nothing to merge.
    expect(next.state.phase).toBe('finished');
    expect(next.actions).toEqual([]);
  });
});

describe('defragmentation phase 2 (move and merge)', () => {
  /** A state in phase 2 with the chunks' sizes known. */
  function measured(chunks: SizedChunk[]): DefragmentationState {
    const estimates = Object.fromEntries(chunks.map((c) => [rangeKey(c.range), c.estimatedSizeBytes ?? 0]));
    return { ...startDefragmentation(NS), phase: 'moveAndMergeChunks', estimates };
  }

  it('moves a small chunk to the neighbour it is smaller than', () => {
    const chunks = layoutChunks([r('A', 1, 60), r('B', 1, 5), r('C', 1, 3)]);
    const { migrations } = nextDefragmentationMigrations(measured(chunks), { chunks, maxChunkSizeBytes: MAX }, settings);
    // B's 5 MB is smaller than A's 60 but not than C's 3; C's 3 MB goes to B (smaller than 5).
    expect(migrations.map((m) => `${m.from}->${m.to}:${m.reason}`)).toEqual(['B->A:defragmentation']);
  });

  it('prefers the neighbour whose merge makes the chunk no longer small', () => {
    // The 10 MB chunk on X waits for a merge with its X neighbour. B (8 MB) is smaller than both
    // its neighbours; 8 + 10 < 25 but 8 + 20 >= 25, which outweighs X holding less data than C.
    const chunks = layoutChunks([r('X', 1, 30), r('X', 1, 10), r('B', 1, 8), r('C', 1, 20), r('D', 1, 60), r('C', 1, 60)]);
    const { migrations } = nextDefragmentationMigrations(measured(chunks), { chunks, maxChunkSizeBytes: MAX }, settings);
    expect(migrations[0]).toMatchObject({ from: 'B', to: 'C' });
  });

  it('breaks a tie by sending the chunk to the shard with less data', () => {
    const chunks = layoutChunks([r('A', 1, 50), r('B', 1, 5), r('C', 1, 50), r('A', 1, 50)]);
    const { migrations } = nextDefragmentationMigrations(measured(chunks), { chunks, maxChunkSizeBytes: MAX }, settings);
    expect(migrations[0]).toMatchObject({ from: 'B', to: 'C' });
  });

  it('uses a shard in at most one migration and none the caller says is busy', () => {
    const chunks = layoutChunks([r('A', 1, 50), r('B', 1, 5), r('A', 1, 50), r('B', 1, 5), r('C', 1, 50), r('D', 1, 5)]);
    const one = nextDefragmentationMigrations(measured(chunks), { chunks, maxChunkSizeBytes: MAX }, settings);
    expect(one.migrations.map((m) => `${m.from}->${m.to}`)).toEqual(['B->A', 'D->C']);
    const busy = nextDefragmentationMigrations(measured(chunks), { chunks, maxChunkSizeBytes: MAX }, settings, new Set(['C']));
    expect(busy.migrations.map((m) => `${m.from}->${m.to}`)).toEqual(['B->A']);
  });

  it('merges the moved chunk with its new neighbour and knows the merged size', () => {
    let chunks = layoutChunks([r('A', 1, 60), r('B', 1, 5), r('C', 1, 60)]);
    const moved = nextDefragmentationMigrations(measured(chunks), { chunks, maxChunkSizeBytes: MAX }, settings);
    const action = moved.state.inFlight[0] as DefragmentationAction;
    chunks = apply(chunks, action);
    const state = onDefragmentationOutcome(moved.state, action, { ok: true });
    const merge = nextDefragmentationActions(state, { chunks, maxChunkSizeBytes: MAX }, settings);
    expect(merge.actions.map((a) => `${a.kind} ${a.shard}`)).toEqual(['merge A']);
    const merged = onDefragmentationOutcome(merge.state, merge.actions[0] as DefragmentationAction, { ok: true });
    expect(merged.estimates[rangeKey((merge.actions[0] as DefragmentationAction).range)]).toBe(65 * MB);
  });
});

describe('defragmentation errors', () => {
  const chunks = layoutChunks([r('A', 2, 1), r('B', 1, 1)]);
  const snapshot = { chunks, maxChunkSizeBytes: MAX };

  it('issues the same action again after a retryable error', () => {
    const first = nextDefragmentationActions(startDefragmentation(NS), snapshot, settings);
    const merge = first.actions[0] as DefragmentationAction;
    const failed = onDefragmentationOutcome(first.state, merge, { ok: false, retryable: true, error: 'LOCK_BUSY' });
    expect(failed.retries).toEqual([merge]);
    const again = nextDefragmentationActions(failed, snapshot, settings);
    expect(again.actions).toEqual([merge]);
    expect(again.state.retries).toEqual([]);
  });

  it('restarts phase 1 from its beginning after a non-retryable error there', () => {
    const first = nextDefragmentationActions(startDefragmentation(NS), snapshot, settings);
    const failed = onDefragmentationOutcome(first.state, first.actions[0] as DefragmentationAction, {
      ok: false,
      retryable: false,
      error: 'BAD_VALUE',
    });
    expect(failed).toMatchObject({ phase: 'mergeAndMeasureChunks', restarts: 1, lastError: 'BAD_VALUE', retries: [] });
  });

  it('goes back to phase 1 after a non-retryable error in phase 2', () => {
    const state: DefragmentationState = { ...startDefragmentation(NS), phase: 'moveAndMergeChunks' };
    const action: DefragmentationAction = { kind: 'migrate', namespace: NS, shard: 'A', to: 'B', range: (chunks[0] as SizedChunk).range };
    const failed = onDefragmentationOutcome({ ...state, inFlight: [action] }, action, {
      ok: false,
      retryable: false,
      error: 'CHUNK_TOO_BIG',
    });
    expect(failed.phase).toBe('mergeAndMeasureChunks');
  });

  it('restarts phase 3 after a non-retryable error there', () => {
    const state: DefragmentationState = { ...startDefragmentation(NS), phase: 'mergeChunks' };
    const { state: issued, actions } = nextDefragmentationActions(state, snapshot, settings);
    expect(actions.map((a) => a.kind)).toEqual(['merge']);
    const failed = onDefragmentationOutcome(issued, actions[0] as DefragmentationAction, { ok: false, retryable: false, error: 'x' });
    expect(failed).toMatchObject({ phase: 'mergeChunks', restarts: 1, inFlight: [] });
  });

  it('ignores the failure of an action it no longer waits for', () => {
    const state = startDefragmentation(NS);
    const stray: DefragmentationAction = { kind: 'dataSize', namespace: NS, shard: 'B', range: (chunks[2] as SizedChunk).range };
    expect(onDefragmentationOutcome(state, stray, { ok: false, retryable: false, error: 'x' })).toBe(state);
  });
});

describe('defragmentation from start to end', () => {
  it('leaves no small chunk that has a neighbour, fewer chunks and the same data', () => {
    // 60 chunks of 2 MB round-robin over 3 shards, then 6 large chunks.
    const runs: ChunkRun[] = [];
    for (let i = 0; i < 60; i++) runs.push(r(['A', 'B', 'C'][i % 3] as string, 1, 2));
    runs.push(r('A', 3, 60), r('B', 3, 60));
    const initial = layoutChunks(runs);
    const { chunks, state, log } = runToEnd(initial);
    expect(state.phase).toBe('finished');
    expect(state.estimates).toEqual({});
    const total = (cs: SizedChunk[]) => cs.reduce((n, c) => n + (c.estimatedSizeBytes ?? 0), 0);
    expect(total(chunks)).toBe(total(initial));
    expect(chunks.length).toBeLessThan(12);
    expect(chunks.filter((c) => (c.estimatedSizeBytes ?? 0) < MAX / 4)).toEqual([]);
    expect(log.some((l) => l.startsWith('moveAndMergeChunks: migrate'))).toBe(true);
    // Phase 3 left no two contiguous chunks on one shard that would fit in one max-size chunk.
    const sorted = sortChunks(chunks);
    for (let i = 1; i < sorted.length; i++) {
      const [a, b] = [sorted[i - 1] as SizedChunk, sorted[i] as SizedChunk];
      if (a.shard === b.shard) expect((a.estimatedSizeBytes ?? 0) + (b.estimatedSizeBytes ?? 0)).toBeGreaterThan(MAX);
    }
  });

  it('never merges chunks into one above the max chunk size', () => {
    const { chunks } = runToEnd(layoutChunks([r('A', 5, 30), r('B', 1, 5), r('A', 4, 30)]));
    expect(chunks.every((c) => (c.estimatedSizeBytes ?? 0) <= MAX)).toBe(true);
    expect(chunks.length).toBeLessThan(10);
  });
});
