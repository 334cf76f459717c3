// The numbers teardown() reports: how the collection ended up spread over the shards, how many
// splits and migrations the run caused, how soon, and whether the balancer calls it compliant.

import type { ChangelogEvent, ShardDistribution } from './graphql.ts';

export interface ReportInput {
  ns: string;
  /** Every shard of the cluster, so a shard without chunks shows as 0. */
  shards: string[];
  distribution: ShardDistribution[];
  /** Changelog events of the collection since setup (split, multi-split, moveChunk.commit). */
  events: ChangelogEvent[];
  /** The balancer's rounds and load throttle changes since setup (balancer.round, balancer.throttle). */
  balancerEvents: ChangelogEvent[];
  compliance: { balancerCompliant: boolean; firstComplianceViolation: string | null } | null;
  startedAtMs: number;
  loadEndedAtMs: number;
  settledAfterMs: number | null;
  /** add-shard-under-load: the shard added during the run. */
  watchedShard: string | null;
}

export interface TeardownReport {
  ns: string;
  chunks: number;
  /** Per shard, every shard of the cluster, in name order. */
  perShard: ShardDistribution[];
  shardsWithChunks: number;
  /** Most chunks on one shard minus fewest. */
  chunkImbalance: number;
  /** Split commits (a multi-split is one), and the chunks they added. */
  splits: number;
  chunksAddedBySplits: number;
  /** Committed migrations (moveChunk.commit). */
  migrations: number;
  /** From the start of the load to the first split / first migration commit; null when there was none. */
  firstSplitAfterMs: number | null;
  firstMigrationAfterMs: number | null;
  /** The balancer's verdict at the end; null when the control plane cannot tell. */
  compliant: boolean | null;
  firstComplianceViolation: string | null;
  /** From the end of the load until the settle goal was met; null when it was not (or there was none). */
  settledAfterMs: number | null;
  watchedShard: string | null;
  watchedShardChunks: number | null;
  /** The continuous scheduler's load throttle over the run, from the balancer's changelog rows. */
  throttle: ThrottleReport;
}

export interface ThrottleReport {
  /** Rounds that issued or held migrations with the throttle's decision recorded (the continuous scheduler's). */
  roundsDecided: number;
  /** Rounds whose migrations the throttle held back. */
  roundsHeld: number;
  /** Changes between full speed and throttled (balancer.throttle rows), and how many were to throttled. */
  changes: number;
  throttled: number;
  /** The last decision recorded: fullSpeed or throttled; null with none. */
  lastState: string | null;
}

function throttleReportOf(events: ChangelogEvent[]): ThrottleReport {
  const decided = events.filter((e) => e.kind === 'balancer.round' && isRecord(e.details.throttle));
  const changes = events.filter((e) => e.kind === 'balancer.throttle');
  const ordered = [...decided, ...changes].sort((a, b) => a.seq - b.seq);
  const last = ordered[ordered.length - 1];
  const lastState =
    last === undefined
      ? null
      : String((last.kind === 'balancer.throttle' ? last.details : (last.details.throttle as Record<string, unknown>)).state);
  return {
    roundsDecided: decided.length,
    roundsHeld: events.filter((e) => e.kind === 'balancer.round' && isRecord(e.details.held)).length,
    changes: changes.length,
    throttled: changes.filter((e) => e.details.state === 'throttled').length,
    lastState,
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** Added chunks of one split event: a split makes 2 pieces of 1 chunk, a multi-split `pieces`. */
function chunksAddedBy(event: ChangelogEvent): number {
  const pieces = event.details.pieces;
  if (typeof pieces === 'number' && pieces >= 2) return pieces - 1;
  const after = event.details.after;
  return Array.isArray(after) && after.length >= 2 ? after.length - 1 : 1;
}

function firstAfter(events: ChangelogEvent[], startedAtMs: number): number | null {
  const times = events.map((e) => Date.parse(e.time)).filter((t) => !Number.isNaN(t));
  return times.length === 0 ? null : Math.max(0, Math.min(...times) - startedAtMs);
}

export function computeTeardownReport(input: ReportInput): TeardownReport {
  const byShard = new Map(input.distribution.map((d) => [d.shard, d]));
  const names = [...new Set([...input.shards, ...byShard.keys()])].sort();
  const perShard = names.map((shard) => byShard.get(shard) ?? { shard, chunks: 0, estimatedDataBytes: 0 });
  const counts = perShard.map((d) => d.chunks);
  const splits = input.events.filter((e) => e.kind === 'split' || e.kind === 'multi-split');
  const moves = input.events.filter((e) => e.kind === 'moveChunk.commit');
  return {
    ns: input.ns,
    chunks: counts.reduce((a, b) => a + b, 0),
    perShard,
    shardsWithChunks: counts.filter((c) => c > 0).length,
    chunkImbalance: counts.length === 0 ? 0 : Math.max(...counts) - Math.min(...counts),
    splits: splits.length,
    chunksAddedBySplits: splits.reduce((sum, e) => sum + chunksAddedBy(e), 0),
    migrations: moves.length,
    firstSplitAfterMs: firstAfter(splits, input.startedAtMs),
    firstMigrationAfterMs: firstAfter(moves, input.startedAtMs),
    compliant: input.compliance?.balancerCompliant ?? null,
    firstComplianceViolation: input.compliance?.firstComplianceViolation ?? null,
    settledAfterMs: input.settledAfterMs,
    watchedShard: input.watchedShard,
    watchedShardChunks: input.watchedShard === null ? null : (byShard.get(input.watchedShard)?.chunks ?? 0),
    throttle: throttleReportOf(input.balancerEvents),
  };
}

/**
 * The report as k6 custom metrics (Gauges named `tessera_<name>`), the way teardown() emits them
 * into the end-of-test summary. Unknown values (no split yet, no verdict) are left out rather than
 * reported as 0.
 */
export const REPORT_METRICS = [
  'tessera_chunks',
  'tessera_shards_with_chunks',
  'tessera_chunk_imbalance',
  'tessera_splits',
  'tessera_chunks_added_by_splits',
  'tessera_migrations',
  'tessera_first_split_after_ms',
  'tessera_first_migration_after_ms',
  'tessera_compliant',
  'tessera_settled_after_ms',
  'tessera_watched_shard_chunks',
  'tessera_throttle_rounds_held',
  'tessera_throttle_changes',
  // retryable-writes: teardown's check of the documents (retryable-writes.ts, writeCheckMetrics).
  'tessera_documents',
  'tessera_doubled_writes',
  'tessera_unapplied_incs',
  // transactions: teardown's check of the balances (transactions.ts, balanceCheckMetrics).
  'tessera_accounts',
  'tessera_balance_total',
  'tessera_balance_drift',
  'tessera_transfers_committed',
] as const;

export type ReportMetric = (typeof REPORT_METRICS)[number];

export function reportMetrics(report: TeardownReport): Partial<Record<ReportMetric, number>> {
  const metrics: Partial<Record<ReportMetric, number>> = {
    tessera_chunks: report.chunks,
    tessera_shards_with_chunks: report.shardsWithChunks,
    tessera_chunk_imbalance: report.chunkImbalance,
    tessera_splits: report.splits,
    tessera_chunks_added_by_splits: report.chunksAddedBySplits,
    tessera_migrations: report.migrations,
  };
  if (report.firstSplitAfterMs !== null) metrics.tessera_first_split_after_ms = report.firstSplitAfterMs;
  if (report.firstMigrationAfterMs !== null) metrics.tessera_first_migration_after_ms = report.firstMigrationAfterMs;
  if (report.compliant !== null) metrics.tessera_compliant = report.compliant ? 1 : 0;
  if (report.settledAfterMs !== null) metrics.tessera_settled_after_ms = report.settledAfterMs;
  if (report.watchedShardChunks !== null) metrics.tessera_watched_shard_chunks = report.watchedShardChunks;
  metrics.tessera_throttle_rounds_held = report.throttle.roundsHeld;
  metrics.tessera_throttle_changes = report.throttle.changes;
  return metrics;
}

/** A few lines for the console at the end of teardown. */
export function formatReport(report: TeardownReport): string {
  const ms = (v: number | null) => (v === null ? 'none' : `${(v / 1000).toFixed(1)} s`);
  return [
    `tessera: ${report.ns}: ${report.chunks} chunks on ${report.shardsWithChunks}/${report.perShard.length} shards (${report.perShard
      .map((d) => `${d.shard} ${d.chunks}`)
      .join(', ')}), imbalance ${report.chunkImbalance}`,
    `tessera: ${report.splits} splits (+${report.chunksAddedBySplits} chunks), first after ${ms(report.firstSplitAfterMs)}; ${report.migrations} migrations, first after ${ms(report.firstMigrationAfterMs)}`,
    `tessera: balancer ${report.compliant === null ? 'verdict unknown' : report.compliant ? 'compliant' : `not compliant (${report.firstComplianceViolation ?? '?'})`}, settled ${report.settledAfterMs === null ? 'no' : `${ms(report.settledAfterMs)} after the load`}${report.watchedShard === null ? '' : `; ${report.watchedShard} holds ${report.watchedShardChunks} chunks`}`,
    `tessera: load throttle: ${report.throttle.roundsDecided} rounds decided, ${report.throttle.roundsHeld} held migrations, ${report.throttle.changes} changes (${report.throttle.throttled} to throttled), last ${report.throttle.lastState ?? 'none'}`,
  ].join('\n');
}
