import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import {
  type MigratedSession,
  type MigrationDecision,
  type RecvChunkStartRequest,
  type RecvChunkStatus,
  type TransferredDocument,
  deletionLine,
} from '@tessera/protocol';
import type { Failpoints } from '@tessera/platform';
import { FakeNetwork } from '../../../../test/fakes/fake-network.js';
import type { CollectionStorageService } from '../collections/collection-storage.service.js';
import type { ShardIdentityService } from '../identity/shard-identity.service.js';
import type { ShardSettings } from '../shard.settings.js';
import type { SessionRecords } from '../sessions/session-records.service.js';
import type { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import type { CopiedRow } from './copy-transfer.js';
import type { IncomingRangeStore } from './incoming-range.store.js';
import { IncomingSessionHistory } from './incoming-session-history.js';
import { MigrationDestinationService } from './migration-destination.service.js';
import type { MigrationMetrics } from './migration-metrics.js';
import { MigrationPeers } from './migration-peers.js';
import { MigrationRecipientCloner } from './migration-recipient-cloner.js';
import type { MigrationRecipientStore } from './migration-recipient.store.js';
import type { MigrationReport, MigrationReporter } from './migration-reporter.js';
import type { RangeDeleterService } from './range-deleter.service.js';
import type { RangeDeletionStore } from './range-deletion.store.js';
import { testWriteTimes } from '../../../../test/fakes/write-times.js';

const DONOR = 'http://donor.test:4001';
const MIGRATION = '00000000-0000-4000-8000-000000000002';
const logger = pino({ level: 'silent' });

const start: RecvChunkStartRequest = {
  migrationId: MIGRATION,
  ns: 'db.c',
  collectionUuid: '00000000-0000-4000-8000-0000000000cc',
  keyPattern: { x: 1 },
  range: { min: [0], max: [100] },
  donor: 'shard0',
  donorUrl: DONOR,
  indexes: [],
};

/** A row of COPY text: bytea fields as `\\x<hex>`. */
const copyRow = (n: number) => `\\\\x0${n}\t\\\\x1${n}\t{"_id":${n}}\t9\n`;

interface Harness {
  network: FakeNetwork;
  service: MigrationDestinationService;
  steps: string[];
  cloned: number[];
  /** How many clone batches had been asked of the donor when each batch was written. */
  fetchedWhenWritten: number[];
  mods: TransferredDocument[][];
  /** The lsids of each page of migrated history applied, in order. */
  histories: string[][];
  reports: MigrationReport[];
}

interface Options {
  waitForOverlapping?: () => Promise<void>;
  applyMods?: () => Promise<void>;
  /** Captured writes the donor answers, round after round; then none. */
  modRounds?: string[];
  /** The donor's answer to its nth `sessionHistory` call (from 0); none by default. */
  sessionHistory?: (call: number) => MigratedSession[];
  applySessions?: () => Promise<void>;
}

function harness(options: Options = {}): Harness {
  const network = new FakeNetwork();
  const rows = [copyRow(1), copyRow(2), copyRow(3)];
  const rounds = [...(options.modRounds ?? [])];
  network
    .node(DONOR)
    .on('POST', '/internal/migration/migrateClone', (r) => {
      // Row n's _id is encoded as 0n: the rows after it start at index n.
      const { after, limit } = r.body as { after?: { id: string }; limit: number };
      const from = after === undefined ? 0 : Number(after.id.slice(1));
      return rows.slice(from, from + limit).join('');
    })
    .on('POST', '/internal/migration/transferMods', () => rounds.shift() ?? '')
    .on('POST', '/internal/migration/sessionHistory', () => ({
      sessions: options.sessionHistory?.(network.callsTo('/internal/migration/sessionHistory').length - 1) ?? [],
    }));
  const steps: string[] = [];
  const cloned: number[] = [];
  const fetchedWhenWritten: number[] = [];
  const mods: TransferredDocument[][] = [];
  const store = {
    create: async () => void steps.push('create'),
    dropRegistrationsWithoutReceipt: async () => undefined,
    nsOf: async () => 'db.c',
    complete: async (_id: string, decision: MigrationDecision) => void steps.push(`complete:${decision}`),
  } as unknown as MigrationRecipientStore;
  const counter = { inc: () => undefined };
  const metrics = { documentsCloned: counter, bytesCloned: counter } as unknown as MigrationMetrics;
  const rangeDeleter = {
    waitForOverlapping: options.waitForOverlapping ?? (async () => undefined),
    poke: () => void steps.push('poke'),
  } as unknown as RangeDeleterService;
  const storage = {
    localCollection: async () => undefined,
    createCollection: async () => void steps.push('createCollection'),
  } as unknown as CollectionStorageService;
  const rangeDeletions = { recordPending: async () => void steps.push('recordPending') } as unknown as RangeDeletionStore;
  const incoming = {
    createIndexes: async () => undefined,
    applyClone: async (_range: unknown, _text: string, batch: CopiedRow[]) => {
      cloned.push(batch.length);
      fetchedWhenWritten.push(network.callsTo('/internal/migration/migrateClone').length);
    },
    applyMods: async (_range: unknown, documents: TransferredDocument[]) => {
      if (documents.length > 0) await options.applyMods?.();
      mods.push(documents);
    },
  } as unknown as IncomingRangeStore;
  const histories: string[][] = [];
  const records = {
    applyMigrated: async (uuid: string, sessions: MigratedSession[]) => {
      expect(uuid).toBe(start.collectionUuid);
      await options.applySessions?.();
      histories.push(sessions.map((s) => s.lsid));
      return sessions.length;
    },
  } as unknown as SessionRecords;
  const sessionHistory = new IncomingSessionHistory(records);
  const failpoints = { pauseAt: async () => undefined } as unknown as Failpoints;
  const settings = { TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS: 2 } as unknown as ShardSettings;
  const cloner = new MigrationRecipientCloner(
    storage,
    rangeDeleter,
    rangeDeletions,
    incoming,
    sessionHistory,
    metrics,
    failpoints,
    testWriteTimes(),
    settings,
  );
  const runtime = {
    state: async () => ({ invalidate: () => void steps.push('invalidate') }),
    enterCriticalSection: async () => {
      steps.push('enterCriticalSection');
      return { release: () => void steps.push('releaseCriticalSection') };
    },
  } as unknown as ShardingRuntime;
  const reports: MigrationReport[] = [];
  const reporter = { report: (entry: MigrationReport) => reports.push(entry) } as unknown as MigrationReporter;
  const peers = new MigrationPeers({} as ShardIdentityService, network.internalClients());
  const service = new MigrationDestinationService(store, cloner, runtime, rangeDeleter, reporter, peers, logger);
  return { network, service, steps, cloned, fetchedWhenWritten, mods, histories, reports };
}

async function until(h: Harness, states: Array<RecvChunkStatus['state']>): Promise<RecvChunkStatus> {
  for (let i = 0; i < 200; i++) {
    const status = h.service.recvChunkStatus(MIGRATION);
    if (states.includes(status.state)) return { ...status };
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`the receipt never reached ${states.join(' or ')}: ${h.service.recvChunkStatus(MIGRATION).state}`);
}

/** A session's migrated history: one statement. lsids sort by `n`. */
function migratedSession(n: number): MigratedSession {
  return {
    lsid: `00000000-0000-4000-8000-${n.toString().padStart(12, '0')}`,
    txnNumber: 1,
    lastWriteAt: '2026-01-01T00:00:00.000Z',
    statements: [{ stmtId: 0, shardKey: '10', result: '{"op":"insert"}' }],
  };
}

describe('the recipient', () => {
  it('prepares, clones in batches, catches up, commits and keeps the range', async () => {
    const h = harness({ modRounds: [`2\n${deletionLine('01')}${deletionLine('02')}`] });
    expect((await h.service.recvChunkStart(start)).state).toBe('waitingForRangeDeletion');
    const steady = await until(h, ['steady', 'failed']);
    expect(steady).toMatchObject({ state: 'steady', documentsCloned: 3, bytesCloned: 27, modsApplied: 2 });
    expect(h.cloned).toEqual([2, 1]);
    expect(h.network.callsTo('/internal/migration/migrateClone')[1]?.body).toMatchObject({ after: { key: '12', id: '02' } });
    expect((await h.service.recvChunkCommit(MIGRATION)).state).toBe('committing');
    await expect(h.service.recvChunkRelease({ migrationId: MIGRATION, decision: 'committed' })).resolves.toEqual({ released: true });
    expect(h.steps).toEqual([
      'create',
      'createCollection',
      'recordPending',
      'enterCriticalSection',
      'complete:committed',
      'invalidate',
      'releaseCriticalSection',
    ]);
    expect(h.reports).toEqual([
      expect.objectContaining({ what: 'moveChunk.to', details: expect.objectContaining({ decision: 'committed', documentsCloned: 3 }) }),
    ]);
    expect(h.service.recvChunkStatus(MIGRATION)).toMatchObject({ state: 'failed', error: { code: 'NOT_FOUND' } });
  });

  it("fetches the next batch while writing the last, or with the balancer's clone pacing after a wait sized by the batch", async () => {
    const eager = harness();
    await eager.service.recvChunkStart(start);
    expect(await until(eager, ['steady', 'failed'])).toMatchObject({ state: 'steady', clonePausedMs: 0 });
    expect(eager.fetchedWhenWritten).toEqual([2, 2]);

    // The first batch takes some 50 ms (timers may fire a millisecond early): with a wait ratio of 2
    // the clone waits at least 80 ms after it.
    const paced = harness();
    paced.network.delayNth({ path: '/internal/migration/migrateClone', ms: 50 });
    await paced.service.recvChunkStart({ ...start, clonePacing: { batchDocuments: 2, waitRatio: 2 } });
    const status = await until(paced, ['steady', 'failed']);
    expect(status).toMatchObject({ state: 'steady', documentsCloned: 3 });
    expect(status.clonePausedMs).toBeGreaterThanOrEqual(80);
    expect(paced.cloned).toEqual([2, 1]);
    expect(paced.fetchedWhenWritten).toEqual([1, 2]);
    expect(paced.network.callsTo('/internal/migration/migrateClone').map((c) => (c.body as { limit: number }).limit)).toEqual([2, 2]);
  });

  it('follows a pacing sent while it clones, from the next batch on, and says when it receives no such migration', async () => {
    const h = harness();
    // The first batch is held until the pacing has arrived: the next ones come after a wait, one document each.
    h.network.delayNth({ path: '/internal/migration/migrateClone', ms: 50 });
    await h.service.recvChunkStart(start);
    expect(h.service.recvChunkPacing({ migrationId: MIGRATION, clonePacing: { batchDocuments: 1, waitRatio: 1 } })).toEqual({
      applied: true,
    });
    expect(h.service.recvChunkPacing({ migrationId: randomUUID(), clonePacing: null })).toEqual({ applied: false });
    const status = await until(h, ['steady', 'failed']);
    expect(status).toMatchObject({ state: 'steady', documentsCloned: 3 });
    // The first fetch went out with the shard's batch, before the pacing came.
    const limits = h.network.callsTo('/internal/migration/migrateClone').map((c) => (c.body as { limit: number }).limit);
    expect(limits.slice(1).every((limit) => limit === 1)).toBe(true);
    expect(status.clonePausedMs).toBeGreaterThan(0);
  });

  // A failure in each phase fails the receipt with the code of what failed it; the donor's
  // commit is refused with it, and the aborted release makes the range deletion ready.
  it.each<{ phase: string; options?: Options; inject?: (h: Harness) => void; code: string }>([
    {
      phase: 'start (an overlapping range deletion)',
      options: {
        waitForOverlapping: async () => {
          throw new TesseraError('CONFLICTING_OPERATION', 'overlap');
        },
      },
      code: 'CONFLICTING_OPERATION',
    },
    {
      phase: 'clone (the donor is unreachable)',
      inject: (h) => h.network.failNth({ path: '/internal/migration/migrateClone', nth: 2, fault: 'unreachable' }),
      code: 'HOST_UNREACHABLE',
    },
    {
      phase: 'catch-up (the donor ended the donation)',
      inject: (h) => h.network.failNth({ path: '/internal/migration/transferMods', fault: new TesseraError('NOT_FOUND', 'not donating') }),
      code: 'NOT_FOUND',
    },
    {
      phase: 'catch-up (an _id held elsewhere)',
      options: {
        modRounds: [`1\n${deletionLine('01')}`],
        applyMods: async () => {
          throw new TesseraError('DUPLICATE_KEY', 'dup');
        },
      },
      code: 'DUPLICATE_KEY',
    },
    {
      phase: 'session migration (a malformed history page)',
      options: { sessionHistory: () => [{ lsid: 'not-a-uuid' } as unknown as MigratedSession] },
      code: 'BAD_VALUE',
    },
    {
      phase: 'session migration (applying the history fails)',
      options: {
        sessionHistory: () => [migratedSession(1)],
        applySessions: async () => {
          throw new TesseraError('INTERNAL', 'the recipient database failed');
        },
      },
      code: 'INTERNAL',
    },
  ])('fails on a failure in $phase', async ({ options, inject, code }) => {
    const h = harness(options);
    inject?.(h);
    await h.service.recvChunkStart(start);
    const failed = await until(h, ['failed']);
    expect(failed.error?.code).toBe(code);
    const refused = await h.service.recvChunkCommit(MIGRATION).then(
      () => undefined,
      (e: unknown) => e as TesseraError,
    );
    expect(refused?.code).toBe(code);
    await h.service.recvChunkRelease({ migrationId: MIGRATION, decision: 'aborted' });
    expect(h.steps.slice(-2)).toEqual(['complete:aborted', 'poke']);
    expect(h.reports.at(-1)?.details).toMatchObject({ decision: 'aborted' });
  });

  it('stops catching up when released aborted, and its range deletion becomes ready', async () => {
    const h = harness();
    await h.service.recvChunkStart(start);
    await until(h, ['steady']);
    await h.service.recvChunkRelease({ migrationId: MIGRATION, decision: 'aborted' });
    expect(h.steps).toEqual(['create', 'createCollection', 'recordPending', 'complete:aborted', 'poke']);
    expect(h.steps).not.toContain('enterCriticalSection');
  });

  it('pulls the retry history after the clone, page by page, and again inside the commit after the last captured writes', async () => {
    const firstPage = Array.from({ length: 1000 }, (_, i) => migratedSession(i));
    const h = harness({
      modRounds: [`1\n${deletionLine('01')}`],
      // After the clone: a full page, then the rest. Inside the commit: everything again, plus a
      // session written during the migration.
      sessionHistory: (call) => [firstPage, [migratedSession(1000)], [migratedSession(1), migratedSession(1001)]][call] ?? [],
    });
    await h.service.recvChunkStart(start);
    const steady = await until(h, ['steady', 'failed']);
    expect(steady).toMatchObject({ state: 'steady', modsApplied: 1, sessionsMigrated: 1001 });
    const pulls = h.network.callsTo('/internal/migration/sessionHistory');
    expect(pulls.map((c) => c.body)).toEqual([
      { migrationId: MIGRATION, limit: 1000 },
      { migrationId: MIGRATION, limit: 1000, afterLsid: firstPage[999]!.lsid },
    ]);
    expect(h.network.callsTo('/internal/migration/transferMods').length).toBeGreaterThan(0);

    const committing = await h.service.recvChunkCommit(MIGRATION);
    expect(committing).toMatchObject({ state: 'committing', sessionsMigrated: 1003 });
    const last = h.network.calls.at(-1);
    expect(last?.path).toBe('/internal/migration/sessionHistory');
    expect(h.histories.at(-1)).toEqual([migratedSession(1).lsid, migratedSession(1001).lsid]);
    await h.service.recvChunkRelease({ migrationId: MIGRATION, decision: 'committed' });
    expect(h.reports.at(-1)?.details).toMatchObject({ sessionsMigrated: 1003 });
  });

  it('answers the same status to the same recvChunkStart', async () => {
    const h = harness();
    const first = await h.service.recvChunkStart(start);
    expect(await h.service.recvChunkStart(start)).toBe(first);
    expect(h.steps.filter((s) => s === 'create')).toHaveLength(1);
    await h.service.recvChunkRelease({ migrationId: MIGRATION, decision: 'aborted' });
  });
});
