import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import type { DonorMoveRangeRequest, MigrationDecision, RecvChunkStatus } from '@tessera/protocol';
import type { Failpoints } from '@tessera/platform';
import { type FakeFault, FakeNetwork } from '../../../../test/fakes/fake-network.js';
import type { ShardIdentityService } from '../identity/shard-identity.service.js';
import type { ShardSettings } from '../shard.settings.js';
import type { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import type { DonorPlan, DonorPreconditions } from './donor-preconditions.js';
import { MigrationCloner } from './migration-cloner.js';
import { MigrationCoordinator } from './migration-coordinator.js';
import type { CoordinatorDocument, CoordinatorStart, MigrationCoordinatorStore } from './migration-coordinator.store.js';
import type { MigrationMetrics } from './migration-metrics.js';
import type { SessionRecords } from '../sessions/session-records.service.js';
import type { MigrationModsStore } from './migration-mods.store.js';
import { MigrationPeers } from './migration-peers.js';
import type { MigrationReport, MigrationReporter } from './migration-reporter.js';
import { MigrationSourceManager } from './migration-source-manager.js';
import type { RangeDeleterService } from './range-deleter.service.js';

const CONFIG = 'http://config.test:4000';
const RECIPIENT = 'http://recipient.test:4002';
const MIGRATION = '00000000-0000-4000-8000-000000000001';
const NS = 'db.c';
const logger = pino({ level: 'silent' });

const request: DonorMoveRangeRequest = {
  migrationId: MIGRATION,
  ns: NS,
  collectionUuid: '00000000-0000-4000-8000-0000000000cc',
  range: { min: [0], max: [100] },
  recipient: 'shard1',
  recipientUrl: RECIPIENT,
  forceJumbo: false,
  waitForDelete: false,
  maxChunkSizeBytes: 1 << 20,
} as DonorMoveRangeRequest;

const plan: DonorPlan = {
  shard: 'shard0',
  collectionUuid: request.collectionUuid,
  keyPattern: { x: 1 },
  collectionVersion: { epoch: 'e', timestamp: { t: 1, i: 0 } },
  shardVersion: {},
  range: { min: [0], max: [100] } as unknown as DonorPlan['range'],
  table: 'coll_test',
  min: Buffer.from([1]),
  max: Buffer.from([2]),
  size: { documents: 10, bytes: 100 },
};

/** The coordinator documents, in memory, and the steps taken on them. */
class FakeCoordinatorStore {
  readonly documents = new Map<string, CoordinatorDocument>();
  readonly steps: string[] = [];

  async create(start: CoordinatorStart): Promise<CoordinatorDocument> {
    const r = start.registration;
    const document = {
      id: r.migrationId,
      ns: r.ns,
      collectionUuid: start.collectionUuid,
      recipient: r.otherShard,
      recipientUrl: start.recipientUrl,
      decision: undefined,
    };
    this.documents.set(r.migrationId, document);
    this.steps.push('create');
    return document;
  }
  async recordDecision(id: string, decision: MigrationDecision): Promise<void> {
    this.documents.get(id)!.decision = decision;
    this.steps.push(`decision:${decision}`);
  }
  async completeCommitted(id: string): Promise<void> {
    this.documents.delete(id);
    this.steps.push('completeCommitted');
  }
  async forgetRangeDeletion(): Promise<void> {
    this.steps.push('forgetRangeDeletion');
  }
  async completeAborted(id: string): Promise<void> {
    this.documents.delete(id);
    this.steps.push('completeAborted');
  }
}

/** Every query answers no rows: enough for the capture triggers' DDL and the index listing. */
const fakeDataSource = (() => {
  const manager = { query: async () => [] };
  return { query: async () => [], manager, transaction: async (work: (m: unknown) => unknown) => work(manager) };
})();

interface Harness {
  network: FakeNetwork;
  manager: MigrationSourceManager;
  store: FakeCoordinatorStore;
  reports: MigrationReport[];
  sections: string[];
  released: MigrationDecision[];
}

function harness(
  options: {
    status?: () => RecvChunkStatus;
    criticalSection?: () => never;
    configCommit?: () => unknown;
    decision?: MigrationDecision;
  } = {},
): Harness {
  const network = new FakeNetwork();
  const released: MigrationDecision[] = [];
  const status = (state: RecvChunkStatus['state']): RecvChunkStatus => ({
    migrationId: MIGRATION,
    state,
    documentsCloned: 10,
    bytesCloned: 100,
    modsApplied: 0,
    sessionsMigrated: 0,
    clonePausedMs: 0,
  });
  network
    .node(RECIPIENT)
    .on('POST', '/internal/migration/recvChunkStart', () => status('waitingForRangeDeletion'))
    .on('POST', '/internal/migration/recvChunkStatus', options.status ?? (() => status('steady')))
    .on('POST', '/internal/migration/recvChunkCommit', () => status('committing'))
    .on('POST', '/internal/migration/recvChunkRelease', (r) => {
      released.push((r.body as { decision: MigrationDecision }).decision);
      return { released: true };
    });
  network
    .node(CONFIG)
    .on('POST', '/internal/catalog/commitMigration', options.configCommit ?? (() => ({})))
    .on('POST', '/internal/migrations/decide', () => ({ decision: options.decision ?? 'aborted' }));

  const identity = { get: async () => ({ shardName: 'shard0', configUrl: CONFIG }) } as unknown as ShardIdentityService;
  const peers = new MigrationPeers(identity, network.internalClients());
  const settings = {
    TESSERA_HOST: '127.0.0.1',
    TESSERA_PORT: 4001,
    TESSERA_MIGRATION_CRITICAL_SECTION_TIMEOUT_MS: 300,
    TESSERA_ORPHAN_CLEANUP_DELAY_SECS: 0,
  } as unknown as ShardSettings;
  const cloner = new MigrationCloner(fakeDataSource as never, {} as MigrationModsStore, {} as SessionRecords, peers, settings, logger);
  const sections: string[] = [];
  const runtime = {
    state: async () => ({ invalidate: () => undefined, checkShardVersion: async () => ({}) }),
    enterCriticalSection: async () => {
      options.criticalSection?.();
      sections.push('enter');
      return { blockReads: () => sections.push('blockReads'), release: () => sections.push('release') };
    },
  } as unknown as ShardingRuntime;
  const counter = { inc: () => undefined, observe: () => undefined };
  const metrics = { started: counter, committed: counter, aborted: counter, criticalSection: counter } as unknown as MigrationMetrics;
  const rangeDeleter = { donorDelaySecs: 0, poke: () => undefined } as unknown as RangeDeleterService;
  const store = new FakeCoordinatorStore();
  const coordinator = new MigrationCoordinator(
    store as unknown as MigrationCoordinatorStore,
    cloner,
    runtime,
    rangeDeleter,
    metrics,
    peers,
    logger,
  );
  const reports: MigrationReport[] = [];
  const reporter = { report: (entry: MigrationReport) => reports.push(entry) } as unknown as MigrationReporter;
  const preconditions = { check: async () => plan } as unknown as DonorPreconditions;
  const failpoints = { pauseAt: async () => undefined } as unknown as Failpoints;
  const manager = new MigrationSourceManager(preconditions, coordinator, cloner, runtime, reporter, failpoints, settings, logger);
  return { network, manager, store, reports, sections, released };
}

const phasesOf = (reports: MigrationReport[]) => reports.filter((r) => r.what === 'moveChunk.phase').map((r) => r.details.phase);

async function failure(work: Promise<unknown>): Promise<TesseraError> {
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TesseraError);
  return error as TesseraError;
}

describe('the donor', () => {
  it('runs every phase in order, commits, and releases the recipient', async () => {
    const h = harness();
    const result = await h.manager.run(request, undefined);
    const all = [
      'registered',
      'cloning',
      'steady',
      'criticalSection',
      'recipientCommitted',
      'committed',
      'released',
      'rangeDeletionScheduled',
    ];
    expect(result.phases.map((p) => p.phase)).toEqual(all);
    expect(phasesOf(h.reports)).toEqual(all);
    expect(h.reports.map((r) => r.what)).toEqual(['moveChunk.start', ...all.map(() => 'moveChunk.phase'), 'moveChunk.from']);
    expect(h.store.steps).toEqual(['create', 'decision:committed', 'completeCommitted']);
    expect(h.sections).toEqual(['enter', 'blockReads', 'release']);
    expect(h.released).toEqual(['committed']);
    expect(result).toMatchObject({ documentsCloned: 10, bytesCloned: 100, donor: 'shard0', recipient: 'shard1' });
  });

  // A failure in each phase before the config commit aborts: the recipient is released with
  // `aborted`, the donor's range deletion goes, the error is reported and rethrown with its code.
  it.each<{ phase: string; inject: (h: Harness) => void; options?: Parameters<typeof harness>[0]; code: string; reached: string[] }>([
    {
      phase: 'startClone (recipient unreachable)',
      inject: (h) => h.network.failNth({ path: '/internal/migration/recvChunkStart', fault: 'unreachable' }),
      code: 'HOST_UNREACHABLE',
      reached: ['registered'],
    },
    {
      phase: 'awaitSteadyState (the recipient failed)',
      inject: () => undefined,
      options: {
        status: () => ({
          migrationId: MIGRATION,
          state: 'failed',
          documentsCloned: 0,
          bytesCloned: 0,
          modsApplied: 0,
          sessionsMigrated: 0,
          clonePausedMs: 0,
          error: { code: 'DUPLICATE_KEY', message: 'dup' },
        }),
      },
      code: 'DUPLICATE_KEY',
      reached: ['registered', 'cloning'],
    },
    {
      phase: 'awaitSteadyState (status times out)',
      inject: (h) => h.network.failNth({ path: '/internal/migration/recvChunkStatus', fault: 'timeout' as FakeFault }),
      code: 'NETWORK_TIMEOUT',
      reached: ['registered', 'cloning'],
    },
    {
      phase: 'enterCriticalSection (section held)',
      inject: () => undefined,
      options: {
        criticalSection: () => {
          throw new TesseraError('CONFLICTING_OPERATION', 'held');
        },
      },
      code: 'CONFLICTING_OPERATION',
      reached: ['registered', 'cloning', 'steady'],
    },
    {
      phase: 'commitOnRecipient (refused)',
      inject: (h) => h.network.failNth({ path: '/internal/migration/recvChunkCommit', fault: new TesseraError('NOT_FOUND', 'gone') }),
      code: 'NOT_FOUND',
      reached: ['registered', 'cloning', 'steady', 'criticalSection'],
    },
    {
      phase: 'commitOnRecipient (past the critical section timeout)',
      inject: (h) => h.network.delayNth({ path: '/internal/migration/recvChunkCommit', ms: 600 }),
      code: 'EXCEEDED_TIME_LIMIT',
      reached: ['registered', 'cloning', 'steady', 'criticalSection'],
    },
    {
      phase: 'commitOnConfig (refused, decided aborted)',
      inject: (h) => h.network.failNth({ path: '/internal/catalog/commitMigration', fault: new TesseraError('STALE_EPOCH', 'dropped') }),
      code: 'CONFLICTING_OPERATION',
      reached: ['registered', 'cloning', 'steady', 'criticalSection', 'recipientCommitted'],
    },
  ])('aborts on a failure in $phase', async ({ inject, options, code, reached }) => {
    const h = harness(options);
    inject(h);
    const error = await failure(h.manager.run(request, undefined));
    expect(error.code).toBe(code);
    expect(phasesOf(h.reports)).toEqual(reached);
    const reported = h.reports.at(-1)!;
    expect(reported.what).toBe('moveChunk.error');
    expect(reported.details.phases).toHaveLength(reached.length);
    expect(h.store.steps).toEqual(['create', 'decision:aborted', 'forgetRangeDeletion', 'completeAborted']);
    expect(h.released).toEqual(['aborted']);
    if (h.sections.includes('enter')) expect(h.sections.at(-1)).toBe('release');
  });

  it('commits when the config commit went unanswered but the decision says committed', async () => {
    const h = harness({ decision: 'committed' });
    h.network.failNth({ path: '/internal/catalog/commitMigration', fault: 'unreachable' });
    const result = await h.manager.run(request, undefined);
    expect(result.phases.at(-1)?.phase).toBe('rangeDeletionScheduled');
    expect(h.network.callsTo('/internal/migrations/decide')).toHaveLength(1);
    expect(h.store.steps).toEqual(['create', 'decision:committed', 'completeCommitted']);
  });

  it('keeps releasing the recipient until it answers', async () => {
    const h = harness();
    h.network.failNth({ path: '/internal/migration/recvChunkRelease', fault: 'unreachable' });
    await h.manager.run(request, undefined);
    expect(h.network.callsTo('/internal/migration/recvChunkRelease')).toHaveLength(2);
    expect(h.released).toEqual(['committed']);
  });

  // A donor serving two migrations of one collection: they clone side by side, and their
  // critical sections take turns, also when the first one aborts in its section.
  it.each([
    { first: 'commits', inject: (h: Harness) => h.network.delayNth({ path: '/internal/catalog/commitMigration', ms: 100 }) },
    {
      first: 'aborts',
      inject: (h: Harness) =>
        h.network.failNth({ path: '/internal/migration/recvChunkCommit', fault: new TesseraError('NOT_FOUND', 'gone') }),
    },
  ])('takes the critical sections of two donations of one collection in turn when the first $first', async ({ first, inject }) => {
    const h = harness();
    inject(h);
    const second = {
      ...request,
      migrationId: '00000000-0000-4000-8000-000000000002',
      range: { min: [100], max: [200] },
      recipient: 'shard2',
    };
    const outcomes = await Promise.allSettled([
      h.manager.run(request, undefined),
      h.manager.run(second as DonorMoveRangeRequest, undefined),
    ]);
    // Whichever reaches its critical section first is `first` (the status polls run on real timers).
    expect(outcomes.map((o) => o.status).sort()).toEqual(first === 'commits' ? ['fulfilled', 'fulfilled'] : ['fulfilled', 'rejected']);
    expect(h.sections).toEqual(
      first === 'commits'
        ? ['enter', 'blockReads', 'release', 'enter', 'blockReads', 'release']
        : ['enter', 'release', 'enter', 'blockReads', 'release'],
    );
    // Both were cloning before either entered its critical section.
    const cloning = h.reports.filter((r) => r.what === 'moveChunk.phase' && r.details.phase === 'cloning');
    const sections = h.reports.filter((r) => r.what === 'moveChunk.phase' && r.details.phase === 'criticalSection');
    expect(h.reports.indexOf(cloning[1]!)).toBeLessThan(h.reports.indexOf(sections[0]!));
    expect(sections.map((r) => typeof r.details.waitedForTurnMs)).toEqual(['undefined', 'number']);
  });

  it('fails in checkPreconditions without registering anything', async () => {
    const h = harness();
    (h.manager as unknown as { preconditions: DonorPreconditions }).preconditions = {
      check: async () => {
        throw new TesseraError('CHUNK_TOO_BIG', 'too big');
      },
    } as unknown as DonorPreconditions;
    expect((await failure(h.manager.run(request, undefined))).code).toBe('CHUNK_TOO_BIG');
    expect(h.store.steps).toEqual([]);
    expect(h.network.calls).toHaveLength(0);
  });
});
