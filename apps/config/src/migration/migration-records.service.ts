import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { decideMigrationRequestSchema, type MigrationDecision } from '@tessera/protocol';
import { InternalClients, LOGGER, SETTINGS, parseWith } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import type { FencedTransaction } from '../ddl/ddl-coordinator.js';
import { LeaderService } from '../leader/leader.service.js';
import { LeaderPeriodic } from '../leader/leader-periodic.js';
import { ActiveMigrationStore, type MigrationRecord } from './active-migration.store.js';

/** How long a shard has to say whether it runs a migration. */
const STATUS_TIMEOUT_MS = 5_000;
/** How often a DDL waiting for a collection's migrations to end looks again, and how often it says it is still waiting. */
const DRAIN_POLL_MS = 100;
const DRAIN_LOG_MS = 10_000;

/**
 * Keeps every migration record tied to a live migration. A record normally goes when its donor
 * answers `moveRange`; this service ends the others:
 * - `ended`: a donor's recovery, which no `moveRange` caller waits for, says it has finished a
 *   migration by its decision (asked for with `decide`, which records `aborted` if none was made).
 * - `reconcile`, on the leader every `TESSERA_MIGRATION_RECONCILE_INTERVAL_MS`: a record older
 *   than `TESSERA_MIGRATION_RECORD_GRACE_MS` that neither its donor nor its recipient runs or
 *   remembers (both answer, and neither has it registered) is settled: `aborted` is recorded
 *   unless a decision exists, so a donor that comes to it late cannot commit, and the record
 *   goes with a `moveChunk.recordRemoved` changelog row. A shard that does not answer may still
 *   run it: its record stays until it answers.
 */
@Injectable()
export class MigrationRecordsService implements OnModuleInit, OnApplicationShutdown {
  private readonly loop: LeaderPeriodic;

  constructor(
    private readonly dataSource: DataSource,
    private readonly store: ActiveMigrationStore,
    private readonly changelog: ChangelogService,
    private readonly clients: InternalClients,
    private readonly leader: LeaderService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.loop = new LeaderPeriodic(
      'migration records',
      async () => {
        await this.reconcile();
      },
      this.settings.TESSERA_MIGRATION_RECONCILE_INTERVAL_MS,
      (error) => this.logger.warn({ err: error }, `reconciling migration records failed: ${(error as Error).message}`),
    );
  }

  onModuleInit(): void {
    this.leader.register(this.loop);
  }

  onApplicationShutdown(): void {
    this.loop.stop();
  }

  /**
   * The decision of a migration, recording `aborted` when none was made. The record stays: the
   * donor still finishes the migration by it (a DDL that stopped migrations waits for that).
   */
  async decide(input: unknown): Promise<{ decision: MigrationDecision }> {
    const { migrationId } = parseWith(decideMigrationRequestSchema, input, 'decideMigration request');
    return { decision: await this.store.decide(this.dataSource, migrationId) };
  }

  /** A donor's recovery finished migration `migrationId` by its decision: its record goes. */
  async ended(input: unknown): Promise<{ ok: 1 }> {
    const { migrationId } = parseWith(decideMigrationRequestSchema, input, 'migrationEnded request');
    if (await this.store.remove(migrationId)) this.logger.info({ migrationId }, `migration ${migrationId} ended in its donor's recovery`);
    return { ok: 1 };
  }

  /** Settles every record past its grace period that no shard runs; answers how many went. */
  async reconcile(): Promise<number> {
    let removed = 0;
    for (const record of await this.store.olderThan(this.settings.TESSERA_MIGRATION_RECORD_GRACE_MS)) {
      if (await this.settleIfNotRunning(record, 'neither its donor nor its recipient runs it')) removed++;
    }
    return removed;
  }

  /**
   * Settles `record` when it is past its grace period and its donor and recipient both answer
   * that they do not take part in it; answers whether it went. A shard that cannot be asked
   * counts as running it.
   */
  async settleIfNotRunning(record: MigrationRecord, why: string): Promise<boolean> {
    if (record.startedAt.getTime() > Date.now() - this.settings.TESSERA_MIGRATION_RECORD_GRACE_MS) return false;
    if (await this.isRunning(record)) return false;
    const settled = await this.dataSource.transaction(async (manager) => {
      const outcome = await this.store.settle(manager, record.id);
      if (outcome.removed) {
        await this.changelog.record(manager, {
          what: 'moveChunk.recordRemoved',
          ns: record.ns,
          shard: record.donor,
          details: {
            migrationId: record.id,
            from: record.donor,
            to: record.recipient,
            min: JSON.parse(record.minEjson) as unknown,
            max: JSON.parse(record.maxEjson) as unknown,
            startedAt: record.startedAt.toISOString(),
            decision: outcome.decision,
            why,
          },
        });
      }
      return outcome;
    });
    if (settled.removed) {
      this.logger.warn(
        { migrationId: record.id, ns: record.ns, decision: settled.decision },
        `removed the record of migration ${record.id} of ${record.ns} (${record.donor} → ${record.recipient}): ${why}`,
      );
    }
    return settled.removed;
  }

  /**
   * For a DDL that must not run beside a migration of the collection (dropCollection,
   * refineCollectionShardKey; MongoDB's DDL coordinators stop and drain migrations the same way):
   * turns `allow_migrations` off in `inFencedTransaction`, then waits until every migration
   * recorded for the collection has ended. None can start meanwhile (register checks the flag),
   * and one in flight cannot commit (commitMigration checks it), so the wait is about as long as
   * the migrations' remaining cloning. A record past its grace period that no shard runs goes
   * at once; one whose shards do not answer is waited for, as their recovery decides it.
   */
  async stopMigrations(uuid: string, inFencedTransaction: FencedTransaction): Promise<void> {
    await inFencedTransaction((manager) =>
      manager.query('UPDATE collections SET allow_migrations = false, updated_at = now() WHERE uuid = $1', [uuid]),
    );
    const started = Date.now();
    let logged = started;
    for (;;) {
      const records = await this.store.ofCollection(uuid);
      if (records.length === 0) return;
      for (const record of records) {
        await this.settleIfNotRunning(record, 'a DDL operation stopped migrations of the collection, and no shard runs it');
      }
      if (Date.now() - logged >= DRAIN_LOG_MS) {
        logged = Date.now();
        this.logger.info(
          { migrations: records.map((r) => r.id) },
          `${records[0]!.ns}: waiting ${Math.round((logged - started) / 1000)} s for ${records.length} migration(s) to end before the DDL operation goes on`,
        );
      }
      await sleep(DRAIN_POLL_MS);
    }
  }

  /** True unless both shards answer and neither lists the migration (registered, or, for the donor, starting). */
  private async isRunning(record: MigrationRecord): Promise<boolean> {
    const ask = (url: string) =>
      this.clients
        .migration(url, STATUS_TIMEOUT_MS)
        .status()
        .then((status) => status.migrations.some((m) => m.migrationId === record.id))
        .catch(() => true);
    const [donor, recipient] = await Promise.all([ask(record.donorUrl), ask(record.recipientUrl)]);
    return donor || recipient;
  }
}
