import { describe, expect, it } from 'vitest';
import { computeTeardownReport, formatReport, reportMetrics } from './report.ts';

const base = {
  ns: 'load.t',
  shards: ['shard1', 'shard0', 'shard2'],
  events: [],
  balancerEvents: [],
  compliance: null,
  startedAtMs: 0,
  loadEndedAtMs: 60_000,
  settledAfterMs: null,
  watchedShard: null,
};

describe('the teardown report', () => {
  it('lists every shard, those without chunks as 0, and measures the imbalance', () => {
    const report = computeTeardownReport({
      ...base,
      distribution: [
        { shard: 'shard0', chunks: 5, estimatedDataBytes: 500 },
        { shard: 'shard1', chunks: 1, estimatedDataBytes: 100 },
      ],
    });
    expect(report.perShard).toEqual([
      { shard: 'shard0', chunks: 5, estimatedDataBytes: 500 },
      { shard: 'shard1', chunks: 1, estimatedDataBytes: 100 },
      { shard: 'shard2', chunks: 0, estimatedDataBytes: 0 },
    ]);
    expect(report).toMatchObject({ chunks: 6, shardsWithChunks: 2, chunkImbalance: 5 });
  });

  it('leaves unknown figures out of the metrics instead of reporting them as 0', () => {
    const report = computeTeardownReport({ ...base, distribution: [] });
    const metrics = reportMetrics(report);
    expect(metrics).toEqual({
      tessera_chunks: 0,
      tessera_shards_with_chunks: 0,
      tessera_chunk_imbalance: 0,
      tessera_splits: 0,
      tessera_chunks_added_by_splits: 0,
      tessera_migrations: 0,
      tessera_throttle_rounds_held: 0,
      tessera_throttle_changes: 0,
    });
  });

  it("counts the load throttle's decisions: rounds decided and held, changes, and the last state", () => {
    const round = (seq: number, details: Record<string, unknown>) => ({ seq, time: '', kind: 'balancer.round', shard: null, details });
    const change = (seq: number, state: string) => ({ seq, time: '', kind: 'balancer.throttle', shard: null, details: { state } });
    const report = computeTeardownReport({
      ...base,
      distribution: [],
      balancerEvents: [
        round(1, { throttle: { state: 'fullSpeed' } }),
        change(2, 'throttled'),
        round(3, { throttle: { state: 'throttled' }, held: { count: 1, why: 'paused' } }),
        round(4, { migrations: [] }),
        change(5, 'fullSpeed'),
      ],
    });
    expect(report.throttle).toEqual({ roundsDecided: 2, roundsHeld: 1, changes: 2, throttled: 1, lastState: 'fullSpeed' });
    expect(reportMetrics(report)).toMatchObject({ tessera_throttle_rounds_held: 1, tessera_throttle_changes: 2 });
    expect(formatReport(report)).toContain(
      'load throttle: 2 rounds decided, 1 held migrations, 2 changes (1 to throttled), last fullSpeed',
    );
  });

  it('reports the verdict and the watched shard as metrics and text', () => {
    const report = computeTeardownReport({
      ...base,
      distribution: [{ shard: 'shard2', chunks: 2, estimatedDataBytes: 1 }],
      compliance: { balancerCompliant: false, firstComplianceViolation: 'chunksImbalance' },
      watchedShard: 'shard2',
      settledAfterMs: 4200,
    });
    expect(reportMetrics(report)).toMatchObject({ tessera_compliant: 0, tessera_watched_shard_chunks: 2, tessera_settled_after_ms: 4200 });
    expect(formatReport(report)).toContain('not compliant (chunksImbalance)');
    expect(formatReport(report)).toContain('shard2 holds 2 chunks');
  });
});
