/**
 * Collection defragmentation (balancer-internals.md "DefragmentationPolicy") as a pure state
 * machine. The state is plain data (the config server persists it with the collection, as
 * MongoDB persists the phase and the chunks' data sizes), so a new leader resumes from it.
 *
 *     mergeAndMeasureChunks --(no merge or dataSize left)--> moveAndMergeChunks
 *     moveAndMergeChunks    --(no small chunk can move)----> mergeChunks
 *     mergeChunks           --(no merge left)--------------> finished
 *
 * Work is derived from the current chunks on every call, so an action that failed or a chunk
 * changed by someone else is simply looked at again:
 * - phase 1 merges each run of contiguous chunks on one shard, then measures (`dataSize`) every
 *   chunk whose size it does not know;
 * - phase 2 moves each small chunk (< 25% of the max chunk size) to the shard of a neighbour,
 *   chosen by the reference's score, and merges it with that neighbour once it is there;
 * - phase 3 merges the remaining runs of contiguous chunks on one shard, without measuring.
 *
 * Choice where the reference is silent: no merge makes a chunk larger than the max chunk size
 * (sizes known from a `dataSize`, or from the snapshot's `estimatedSizeBytes`), because Tessera's
 * balancer moves whole chunks and a chunk over twice the max cannot move.
 *
 * Errors: a retryable failure issues the same action again (first, while its chunks are still
 * as they were); any other failure restarts the phase (phase 1 or 3) or, from phase 2, goes back
 * to phase 1. Migrations go to the balancer's main thread (`nextDefragmentationMigrations`, before
 * the chunk selection policy); merges and data sizes to its secondary thread
 * (`nextDefragmentationActions`, spaced by `defragmentationThrottlingMS`, at most 50 in flight).
 */
import type { ChunkRange } from '../ranges/chunk-range.js';
import { rangesEqual, rangesOverlap } from '../ranges/chunk-range.js';
import type { Chunk, ShardId } from '../routing/chunk.js';
import type { DefragmentationSettings } from './balancer-settings.js';
import type { MigrationPlan } from './distribution.js';
import { rangeKey } from './distribution.js';
import { migrationWork, secondaryWork } from './defragmentation-work.policy.js';

/** The phases, in order, MongoDB's names. */
export type DefragmentationPhase = 'mergeAndMeasureChunks' | 'moveAndMergeChunks' | 'mergeChunks' | 'finished';

/** An action of the policy: a merge or a data size for the secondary thread, or a migration. */
export type DefragmentationAction =
  | {
      readonly kind: 'merge';
      readonly namespace: string;
      readonly shard: ShardId;
      readonly parts: readonly ChunkRange[];
      readonly range: ChunkRange;
    }
  | { readonly kind: 'dataSize'; readonly namespace: string; readonly shard: ShardId; readonly range: ChunkRange }
  | { readonly kind: 'migrate'; readonly namespace: string; readonly shard: ShardId; readonly to: ShardId; readonly range: ChunkRange };

/** How an action ended: `dataSizeBytes` answers a `dataSize`. */
export type DefragmentationOutcome =
  { readonly ok: true; readonly dataSizeBytes?: number } | { readonly ok: false; readonly retryable: boolean; readonly error: string };

/** The persisted state of one collection's defragmentation. */
export interface DefragmentationState {
  readonly namespace: string;
  readonly phase: DefragmentationPhase;
  /** Known data sizes by range (`rangeKey`); MongoDB keeps them in config.chunks until the end. */
  readonly estimates: Readonly<Record<string, number>>;
  /** Issued actions without an outcome yet. */
  readonly inFlight: readonly DefragmentationAction[];
  /** Actions that failed with a retryable error, to issue again. */
  readonly retries: readonly DefragmentationAction[];
  /** How many times a non-retryable error restarted a phase. */
  readonly restarts: number;
  /** The last non-retryable error, for `balancerCollectionStatus`. */
  readonly lastError?: string;
}

/** What the machine reads each call: the collection's chunks now and its max chunk size. */
export interface DefragmentationSnapshot {
  readonly chunks: readonly Chunk[];
  readonly maxChunkSizeBytes: number;
}

/** Starts defragmenting `namespace` (`configureCollectionBalancing(ns, { defragmentCollection: true })`). */
export function startDefragmentation(namespace: string): DefragmentationState {
  return { namespace, phase: 'mergeAndMeasureChunks', estimates: {}, inFlight: [], retries: [], restarts: 0 };
}

/** True once the last phase is over. */
export function isDefragmentationFinished(state: DefragmentationState): boolean {
  return state.phase === 'finished';
}

/**
 * Returns the next merges and data sizes for the secondary thread, at most `limit` (the room
 * left of its 50 outstanding operations), and the state with them in flight. Advances the phase
 * first when the current one has no work left.
 */
export function nextDefragmentationActions(
  state: DefragmentationState,
  snapshot: DefragmentationSnapshot,
  settings: DefragmentationSettings,
  limit = settings.maxActionsInFlight,
): { state: DefragmentationState; actions: DefragmentationAction[] } {
  const current = advancePhase(state, snapshot, settings);
  const room = Math.max(0, Math.min(limit, settings.maxActionsInFlight - current.inFlight.filter((a) => a.kind !== 'migrate').length));
  const candidates = [...validRetries(current, snapshot, 'secondary'), ...secondaryWork(current, snapshot, settings)];
  const actions = takeDisjoint(candidates, current.inFlight, room);
  return { state: issue(current, actions), actions };
}

/**
 * Returns the phase 2 migrations for the main thread, none using a shard of `busyShards` or a
 * shard twice, and the state with them in flight. The caller adds their shards to the busy set
 * it passes to `selectMigrations`.
 */
export function nextDefragmentationMigrations(
  state: DefragmentationState,
  snapshot: DefragmentationSnapshot,
  settings: DefragmentationSettings,
  busyShards: ReadonlySet<ShardId> = new Set(),
): { state: DefragmentationState; migrations: MigrationPlan[] } {
  const current = advancePhase(state, snapshot, settings);
  const busy = new Set(busyShards);
  for (const a of current.inFlight) if (a.kind === 'migrate') busy.add(a.shard).add(a.to);
  const chosen: DefragmentationAction[] = [];
  for (const action of [...validRetries(current, snapshot, 'migration'), ...migrationWork(current, snapshot, settings)]) {
    if (action.kind !== 'migrate' || busy.has(action.shard) || busy.has(action.to)) continue;
    if ([...current.inFlight, ...chosen].some((a) => touches(a, action))) continue;
    chosen.push(action);
    busy.add(action.shard).add(action.to);
  }
  const migrations = chosen.map((a) => ({
    namespace: a.namespace,
    range: a.range,
    from: a.shard,
    to: (a as { to: ShardId }).to,
    reason: 'defragmentation' as const,
    ...(current.estimates[rangeKey(a.range)] === undefined ? {} : { estimatedSizeBytes: current.estimates[rangeKey(a.range)] as number }),
  }));
  return { state: issue(current, chosen), migrations };
}

/**
 * Records the outcome of an issued action: a data size is kept, a phase 2 merge's size is the
 * sum of its parts; a retryable failure queues the action again; any other failure restarts
 * the phase (from phase 2, phase 1). Outcomes of actions not in flight are applied all the same
 * when they succeeded (the change happened) and otherwise ignored.
 */
export function onDefragmentationOutcome(
  state: DefragmentationState,
  action: DefragmentationAction,
  outcome: DefragmentationOutcome,
): DefragmentationState {
  const wasInFlight = state.inFlight.some((a) => sameAction(a, action));
  const inFlight = state.inFlight.filter((a) => !sameAction(a, action));
  if (outcome.ok) {
    const estimates = { ...state.estimates };
    if (action.kind === 'dataSize' && outcome.dataSizeBytes !== undefined) estimates[rangeKey(action.range)] = outcome.dataSizeBytes;
    if (action.kind === 'merge') {
      const sizes = action.parts.map((p) => estimates[rangeKey(p)]);
      for (const p of action.parts) delete estimates[rangeKey(p)];
      if (state.phase === 'moveAndMergeChunks' && sizes.every((s) => s !== undefined))
        estimates[rangeKey(action.range)] = sizes.reduce((a, b) => a + b, 0);
    }
    return { ...state, inFlight, estimates };
  }
  if (!wasInFlight) return state;
  if (outcome.retryable) return { ...state, inFlight, retries: [...state.retries, action] };
  const phase = state.phase === 'moveAndMergeChunks' ? 'mergeAndMeasureChunks' : state.phase;
  return { ...state, inFlight, retries: [], phase, restarts: state.restarts + 1, lastError: outcome.error };
}

/** Moves to the next phase while the current one has nothing left to do or wait for. */
function advancePhase(
  state: DefragmentationState,
  snapshot: DefragmentationSnapshot,
  settings: DefragmentationSettings,
): DefragmentationState {
  let current = state;
  while (current.phase !== 'finished' && current.inFlight.length === 0 && current.retries.length === 0) {
    if (secondaryWork(current, snapshot, settings).length > 0 || migrationWork(current, snapshot, settings).length > 0) break;
    current = { ...current, phase: nextPhase(current.phase) };
    if (current.phase === 'finished') current = { ...current, estimates: {} };
  }
  return current;
}

function nextPhase(phase: DefragmentationPhase): DefragmentationPhase {
  switch (phase) {
    case 'mergeAndMeasureChunks':
      return 'moveAndMergeChunks';
    case 'moveAndMergeChunks':
      return 'mergeChunks';
    case 'mergeChunks':
    case 'finished':
      return 'finished';
  }
}

/** Retries still valid against the chunks now: a merge's parts, or the chunk, exist unchanged on the shard. */
function validRetries(
  state: DefragmentationState,
  snapshot: DefragmentationSnapshot,
  which: 'secondary' | 'migration',
): DefragmentationAction[] {
  const exists = (range: ChunkRange, shard: ShardId): boolean =>
    snapshot.chunks.some((c) => c.shard === shard && rangesEqual(c.range, range));
  return state.retries.filter((a) => {
    if ((a.kind === 'migrate') !== (which === 'migration')) return false;
    return a.kind === 'merge' ? a.parts.every((p) => exists(p, a.shard)) : exists(a.range, a.shard);
  });
}

/** Takes up to `room` actions that touch no chunk of an in-flight or already taken action. */
function takeDisjoint(
  candidates: readonly DefragmentationAction[],
  inFlight: readonly DefragmentationAction[],
  room: number,
): DefragmentationAction[] {
  const taken: DefragmentationAction[] = [];
  for (const a of candidates) {
    if (taken.length >= room) break;
    if ([...inFlight, ...taken].some((b) => touches(a, b))) continue;
    taken.push(a);
  }
  return taken;
}

function issue(state: DefragmentationState, actions: readonly DefragmentationAction[]): DefragmentationState {
  if (actions.length === 0) return state;
  const retries = state.retries.filter((r) => !actions.some((a) => sameAction(a, r)));
  return { ...state, inFlight: [...state.inFlight, ...actions], retries };
}

function touches(a: DefragmentationAction, b: DefragmentationAction): boolean {
  return rangesOverlap(a.range, b.range);
}

function sameAction(a: DefragmentationAction, b: DefragmentationAction): boolean {
  return a.kind === b.kind && a.shard === b.shard && rangesEqual(a.range, b.range);
}
