import { describe, expect, it } from 'vitest';
import { ControlPlaneError } from './graphql.ts';
import { parseWorkloadOptions } from './options.ts';
import { type Sequence, type Step, type StepAnswer, collectReport, setupCollection } from './steps.ts';

const options = parseWorkloadOptions('insert-random', { ADMIN_TOKEN: 'admin-token-0123456789', SETTLE: '3s', NS: 'load.t' });

/** Runs a sequence against canned answers by operation, recording the steps. */
function drive<T>(sequence: Sequence<T>, answer: (step: Step, index: number) => StepAnswer): { result: T; steps: Step[] } {
  const steps: Step[] = [];
  let next = sequence.next();
  while (!next.done) {
    steps.push(next.value);
    next = sequence.next(answer(next.value, steps.length - 1));
  }
  return { result: next.value, steps };
}

const ok = (data: unknown): StepAnswer => ({ status: 200, body: { data } });
const failure = (code: string): StepAnswer => ({ status: 200, body: { data: null, errors: [{ message: 'no', extensions: { code } }] } });
const operationOf = (step: Step) => (step.kind === 'graphql' ? step.request.operation : step.kind);

const distribution = (perShard: Record<string, number>) =>
  ok({
    cluster: { shards: [{ name: 'shard0' }, { name: 'shard1' }, { name: 'shard2' }] },
    collection: {
      ns: 'load.t',
      collectionVersion: '1|0',
      distribution: Object.entries(perShard).map(([shard, chunks]) => ({ shard, chunks, estimatedDataBytes: chunks * 1000 })),
    },
  });

describe('setup sequence', () => {
  it('drops, creates, shards and sizes the collection, then records where the events start', () => {
    const { result, steps } = drive(
      setupCollection(options, { key: { x: 1 } }, () => 1234),
      (step) => {
        if (step.kind === 'graphql' && step.request.operation === 'dropCollection') return failure('NAMESPACE_NOT_FOUND');
        if (step.kind === 'graphql' && step.request.operation === 'clusterBaseline')
          return ok({
            cluster: {
              lastEventSeq: 77,
              shards: [
                { name: 'shard0', state: 'active' },
                { name: 'shard1', state: 'active' },
              ],
            },
          });
        return ok({ ok: true });
      },
    );
    expect(steps.map(operationOf)).toEqual([
      'dropCollection',
      'enableSharding',
      'shardCollection',
      'configureCollectionBalancing',
      'clusterBaseline',
    ]);
    const variables = steps.map((s) => (s.kind === 'graphql' ? s.request.variables : null));
    expect(variables[1]).toEqual({ db: 'load' });
    expect(variables[2]).toEqual({ input: { ns: 'load.t', key: { x: 1 } } });
    expect(variables[3]).toEqual({ ns: 'load.t', chunkSizeBytes: 65536, enableBalancing: true });
    expect(result).toEqual({ ns: 'load.t', startSeq: 77, shards: ['shard0', 'shard1'], startedAtMs: 1234 });
  });

  it('stops at the first error other than a missing collection, with its code', () => {
    const run = () =>
      drive(
        setupCollection(options, { key: { x: 1 } }, () => 0),
        (step) => (operationOf(step) === 'enableSharding' ? failure('UNAUTHORIZED') : ok({})),
      );
    expect(run).toThrow(ControlPlaneError);
    expect(run).toThrow('enableSharding: UNAUTHORIZED');
  });
});

describe('teardown sequence', () => {
  const setup = { ns: 'load.t', startSeq: 10, shards: ['shard0', 'shard1', 'shard2'], startedAtMs: Date.parse('2026-11-23T10:00:00Z') };
  const events = [
    { seq: 11, time: '2026-11-23T10:00:04Z', kind: 'split', shard: 'shard0', details: { pieces: 2 } },
    { seq: 12, time: '2026-11-23T10:00:06Z', kind: 'multi-split', shard: 'shard0', details: { pieces: 3 } },
    { seq: 13, time: '2026-11-23T10:00:09Z', kind: 'moveChunk.commit', shard: 'shard0', details: {} },
  ];
  const balancerRound = {
    seq: 14,
    time: '2026-11-23T10:00:09Z',
    kind: 'balancer.round',
    shard: null,
    details: { throttle: { state: 'fullSpeed' } },
  };

  it('polls until the balancer calls the collection compliant, then reads every page of the changelog', () => {
    let statusCalls = 0;
    let clock = 0;
    const { result, steps } = drive(
      collectReport(options, setup, { compliant: true }, () => (clock += 500)),
      (step) => {
        switch (operationOf(step)) {
          case 'balancerChangelog':
            return ok({ changelog: { nodes: [balancerRound], pageInfo: { endCursor: null, hasNextPage: false } } });
          case 'balancerCollectionStatus':
            statusCalls++;
            return ok({
              balancerCollectionStatus: {
                balancerCompliant: statusCalls >= 3,
                firstComplianceViolation: statusCalls >= 3 ? null : 'chunksImbalance',
              },
            });
          case 'distribution':
            return distribution({ shard0: 2, shard1: 2 });
          case 'changelog': {
            const after = step.kind === 'graphql' ? Number(step.request.variables.after) : 0;
            const page = events.filter((e) => e.seq > after).slice(0, 2);
            const last = page[page.length - 1];
            return ok({
              changelog: {
                nodes: page,
                pageInfo: { endCursor: last ? String(last.seq) : null, hasNextPage: last !== undefined && last.seq < 13 },
              },
            });
          }
          default:
            return ok({});
        }
      },
    );
    expect(steps.filter((s) => s.kind === 'sleep')).toHaveLength(2);
    expect(steps.filter((s) => operationOf(s) === 'changelog')).toHaveLength(2);
    expect(result).toMatchObject({
      chunks: 4,
      shardsWithChunks: 2,
      chunkImbalance: 2,
      splits: 2,
      chunksAddedBySplits: 3,
      migrations: 1,
      firstSplitAfterMs: 4000,
      firstMigrationAfterMs: 9000,
      compliant: true,
      settledAfterMs: 500,
    });
    expect(result.perShard.map((d) => d.shard)).toEqual(['shard0', 'shard1', 'shard2']);
    expect(result.throttle).toMatchObject({ roundsDecided: 1, lastState: 'fullSpeed' });
  });

  it('gives up after SETTLE and reports that it did not settle', () => {
    const { result, steps } = drive(
      collectReport(options, setup, { shardHoldsChunks: 'shard2' }, () => 0),
      (step) => {
        if (operationOf(step) === 'distribution') return distribution({ shard0: 3 });
        if (operationOf(step) === 'changelog' || operationOf(step) === 'balancerChangelog')
          return ok({ changelog: { nodes: [], pageInfo: { endCursor: null, hasNextPage: false } } });
        if (operationOf(step) === 'balancerCollectionStatus') return failure('BAD_VALUE');
        return ok({});
      },
    );
    expect(steps.filter((s) => s.kind === 'sleep')).toHaveLength(3);
    expect(result).toMatchObject({
      settledAfterMs: null,
      watchedShard: 'shard2',
      watchedShardChunks: 0,
      compliant: null,
      splits: 0,
      firstSplitAfterMs: null,
    });
  });
});
