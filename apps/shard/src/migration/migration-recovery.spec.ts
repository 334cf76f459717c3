import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { MigrationDecision } from '@tessera/protocol';
import type { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import type { MigrationCloner } from './migration-cloner.js';
import type { CriticalSectionHandle, MigrationCoordinator } from './migration-coordinator.js';
import type { CoordinatorDocument, MigrationCoordinatorStore } from './migration-coordinator.store.js';
import type { MigrationRegistryStore } from './migration-registry.store.js';
import type { MigrationReporter } from './migration-reporter.js';
import { MigrationRecovery } from './migration-recovery.js';

const document = (id: string, ns: string): CoordinatorDocument => ({
  id,
  ns,
  collectionUuid: `uuid-${ns}`,
  recipient: `to-${id}`,
  recipientUrl: `http://${id}`,
  decision: undefined,
});

/** Recovery over in-memory collaborators: what it did, in order, and the decisions the config server gives. */
async function recover(documents: CoordinatorDocument[], decisions: Record<string, MigrationDecision>): Promise<string[]> {
  const events: string[] = [];
  const runtime = {
    enterCriticalSection: async (ns: string) => {
      events.push(`enter ${ns}`);
      return { blockReads: () => undefined, release: () => events.push(`release ${ns}`) };
    },
  } as unknown as ShardingRuntime;
  const coordinator = {
    decisionFromConfig: async (id: string) => decisions[id]!,
    finish: async (d: CoordinatorDocument, decision: MigrationDecision, section: CriticalSectionHandle | undefined) => {
      events.push(`finish ${d.id} ${decision}${section ? ' with the section' : ''}`);
      section?.release();
      return 0;
    },
    endOnConfig: async () => undefined,
  } as unknown as MigrationCoordinator;
  const recovery = new MigrationRecovery(
    { all: async () => documents } as unknown as MigrationCoordinatorStore,
    { unregisterStrayDonors: async () => undefined } as unknown as MigrationRegistryStore,
    runtime,
    coordinator,
    { dropStrayCaptures: async () => undefined } as unknown as MigrationCloner,
    { report: () => undefined } as unknown as MigrationReporter,
    pino({ level: 'silent' }),
  );
  await recovery.onApplicationBootstrap();
  await recovery.done;
  return events;
}

describe("a donor's recovery", () => {
  it("holds a collection's critical section until every one of its migrations found is finished", async () => {
    // A donor killed while serving two migrations of db.a (one of them committed) and one of db.b.
    const events = await recover([document('m1', 'db.a'), document('m2', 'db.b'), document('m3', 'db.a')], {
      m1: 'aborted',
      m2: 'aborted',
      m3: 'committed',
    });
    expect(events).toEqual([
      'enter db.a',
      'enter db.b',
      'finish m1 aborted',
      'finish m2 aborted with the section',
      'release db.b',
      'finish m3 committed with the section',
      'release db.a',
    ]);
  });
});
