import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import type { Subscription } from 'rxjs';
import {
  type ChunkSelectionSettings,
  type CollectionBalanceStatus,
  type DefragmentationAction,
  type DefragmentationOutcome,
  type MigrationPlan,
  type ShardKeyPattern,
  DEFAULT_CHUNK_SELECTION_SETTINGS,
  DEFAULT_DEFRAGMENTATION_SETTINGS,
  TesseraError,
  migrationThrottleMs,
  nextDefragmentationMigrations,
  onDefragmentationOutcome,
  selectMigrations,
  selectTopChunkMigration,
} from '@tessera/core';
import {
  type BalancerCollectionStatus,
  type BalancerRoundMigration,
  type BalancerStatus,
  type ClusterSettings,
  type MoveTopChunkRequest,
  type MoveTopChunkResult,
  chunkRangeFromWire,
  moveTopChunkRequestSchema,
} from '@tessera/protocol';
import { InternalClients, LOGGER, SETTINGS, parseWith } from '@tessera/platform';
import { findCollection } from '../catalog/catalog-read.service.js';
import { generationOfRow, keyPatternOfRow } from '../catalog/catalog-rows.js';
import { MetadataCommitService } from '../catalog/metadata-commit.service.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { EventBusService } from '../events/event-bus.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { type LeaderOnlyService, LeaderService } from '../leader/leader.service.js';
import { MigrationManagerService } from '../migration/migration-manager.service.js';
import { ClusterSettingsService } from '../settings/cluster-settings.service.js';
import { isInsideActiveWindow } from './active-window.js';
import { type RoundError, type RoundSplit, type Snapshot, describe, errorEntry, wireKey } from './balancer-round.js';
import { BalancerSecondaryService } from './balancer-secondary.service.js';
import { BalancerSplitter } from './balancer-splitter.service.js';
import { ClusterStatisticsService, statisticsOf } from './cluster-statistics.service.js';
import { DefragmentationStore } from './defragmentation-store.service.js';

type LastRound = NonNullable<BalancerStatus['lastRound']>;

/** Changelog kinds after which the balancer runs a round at once rather than at the end of its interval. */
const WAKE_UP_KINDS = new Set(['balancer.settings', 'balancer.configureCollection', 'addShard', 'removeShard.start']);

/**
 * The balancer's main loop (MongoDB's Balancer::_mainThread) on the config leader. A round, when
 * the balancer is on (`mode: 'full'`) and the time is inside the balancing window: snapshot,
 * splits at zone boundaries (awaited), migrations of defragmentation's phase 2, then of the chunk
 * selection policy, all issued in parallel and awaited (a chunk refused as too big is split, or
 * marked jumbo), and one `balancer.round` changelog row. As MongoDB's balancer, a round that has
 * migrations to issue first waits until `TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS`
 * (`balancerMigrationsThrottlingMs`) have passed since the previous round's migrations ended, and
 * the next round starts at once; a round with none to issue is followed by the next
 * `TESSERA_BALANCER_ROUND_INTERVAL_MS` later. It also serves the shards' top-chunk requests.
 * Merges and data sizes are the secondary loop's (`BalancerSecondaryService`). See README.md
 * beside this file.
 */
@Injectable()
export class BalancerService implements LeaderOnlyService, OnModuleInit, OnApplicationShutdown {
  readonly name = 'balancer';
  /** Bumped on every start and stop, so a round of an earlier term does not schedule another. */
  private term = 0;
  private timer: NodeJS.Timeout | undefined;
  private inRound = false;
  private lastRound: LastRound | null = null;
  /** Legacy chunk-count mode: collections the previous round found unbalanced. */
  private readonly chunkCountInProgress = new Set<string>();
  /** The reason of the last no-op round recorded, so an idle balancer does not flood the changelog. */
  private lastIdleReason: string | undefined;
  /** Events that start a round at once (see `wake`). */
  private wakeups: Subscription | undefined;
  private wakeAfterRound = false;
  /** The term whose `runRound` is under way (from its settings read on), if any. */
  private runningTerm: number | undefined;
  /** Shards in a migration this loop issued (a round's, or a top chunk's), with how many. */
  private readonly migratingShards = new Map<string, number>();
  /** When the last round's migrations ended (MongoDB's lastMigrationTime); null: none this term. */
  private lastMigrationAt: number | null = null;
  /** Ends the migration throttle's sleep early (on a wake-up or a stop); set while a round sleeps. */
  private endThrottle: (() => void) | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly leader: LeaderService,
    private readonly clusterSettings: ClusterSettingsService,
    private readonly migrations: MigrationManagerService,
    private readonly commits: MetadataCommitService,
    private readonly changelog: ChangelogService,
    private readonly statistics: ClusterStatisticsService,
    private readonly defragmentation: DefragmentationStore,
    private readonly secondary: BalancerSecondaryService,
    private readonly splitter: BalancerSplitter,
    private readonly clients: InternalClients,
    private readonly events: EventBusService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    this.leader.register(this);
  }

  async startAsLeader(): Promise<void> {
    this.stopLoop();
    const term = ++this.term;
    this.lastIdleReason = undefined;
    this.lastMigrationAt = null;
    this.wakeAfterRound = false;
    this.defragmentation.reset();
    this.secondary.start();
    this.wakeups?.unsubscribe();
    this.wakeups = this.events.stream((e) => WAKE_UP_KINDS.has(e.kind), this.events.lastSeq).subscribe(() => this.wake(term));
    this.schedule(term, 0);
  }

  async stopAsLeader(): Promise<void> {
    this.stopLoop();
    this.secondary.stop();
  }

  onApplicationShutdown(): void {
    this.stopLoop();
  }

  private stopLoop(): void {
    this.wakeups?.unsubscribe();
    this.wakeups = undefined;
    this.term++;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.endThrottle?.();
  }

  /**
   * Starts a round now rather than at the end of the interval (MongoDB wakes its balancer when its
   * settings change): after a change of the balancer's settings or of a collection's, a shard
   * added or draining. Any config process may make the change; every one sees it on the event bus.
   * During a round, the next one follows it at once; a round that would wait for the migration
   * throttle, or is waiting, ends without issuing its migrations, so the next one selects again
   * at once with the change seen.
   */
  private wake(term: number): void {
    if (term !== this.term) return;
    // From the start of runRound, not only of the round proper: a wake-up while it reads the
    // settings must not start a second round beside it.
    if (this.runningTerm === term) {
      this.wakeAfterRound = true;
      this.endThrottle?.();
      return;
    }
    clearTimeout(this.timer);
    this.schedule(term, 0);
  }

  private schedule(term: number, delayMs: number): void {
    this.timer = setTimeout(() => void this.runRound(term), delayMs);
    this.timer.unref();
  }

  private async runRound(term: number): Promise<void> {
    if (term !== this.term) return;
    let issued = false;
    this.runningTerm = term;
    try {
      issued = await this.tick(term);
    } catch (error) {
      this.logger.warn({ err: error }, `balancer round failed: ${(error as Error).message}`);
    } finally {
      if (this.runningTerm === term) this.runningTerm = undefined;
    }
    if (term !== this.term) return;
    const woken = this.wakeAfterRound;
    this.wakeAfterRound = false;
    // As MongoDB's: a round that issued migrations is followed by the next at once (the migration
    // throttle is applied before that round's migrations, so no sleep here).
    this.schedule(term, woken || issued ? 0 : this.settings.TESSERA_BALANCER_ROUND_INTERVAL_MS);
  }

  /** Sleeps `ms`, or less when `endThrottle` is called (a wake-up, a stop). */
  private sleepBeforeMigrations(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        if (this.endThrottle === done) this.endThrottle = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      this.endThrottle = done;
    });
  }

  async status(): Promise<BalancerStatus> {
    const settings = await this.clusterSettings.get();
    return { mode: settings.balancer.mode, inBalancerRound: this.inRound, lastRound: this.lastRound };
  }

  /** `balancerCollectionStatus(ns)`: the policy's verdict on the collection as it is now. */
  async collectionStatus(ns: string): Promise<BalancerCollectionStatus> {
    const settings = await this.clusterSettings.get();
    const row = await findCollection(this.dataSource.manager, ns);
    if (row.defragment_collection) return { balancerCompliant: false, firstComplianceViolation: 'defragmentingChunks' };
    const shards = await this.statistics.shards();
    const distribution = await this.statistics.distribution(row, settings, shards);
    const result = selectMigrations(shards.map(statisticsOf), [distribution], chunkSelectionSettings(settings));
    const status = result.collections[0]!;
    return {
      balancerCompliant: status.balancerCompliant,
      ...(status.firstComplianceViolation !== undefined ? { firstComplianceViolation: status.firstComplianceViolation } : {}),
    };
  }

  /**
   * A shard split off the top (or bottom) chunk of `ns` and asks that it move away (the top-chunk
   * optimization). Scheduled when this process is the leader, the balancer is on and inside its
   * window, the collection is balanced and not being defragmented, and the policy finds a less
   * loaded shard; the migration (reason `topChunk`) runs in the background and its outcome is a
   * `balancer.topChunk` changelog row.
   */
  async moveTopChunk(input: MoveTopChunkRequest): Promise<MoveTopChunkResult> {
    const request = parseWith(moveTopChunkRequestSchema, input, 'moveTopChunk request');
    if (!this.leader.isLeader) return { outcome: 'skipped', why: 'notLeader' };
    const settings = await this.clusterSettings.get();
    if (settings.balancer.mode !== 'full') return { outcome: 'skipped', why: 'balancerOff' };
    if (!isInsideActiveWindow(settings.balancer.activeWindow, new Date())) return { outcome: 'skipped', why: 'outsideActiveWindow' };
    const row = await findCollection(this.dataSource.manager, request.ns);
    if (!row.balancing_enabled) return { outcome: 'skipped', why: 'balancingDisabled' };
    if (row.defragment_collection) return { outcome: 'skipped', why: 'defragmenting' };
    const shards = await this.statistics.shards();
    const distribution = await this.statistics.distribution(row, settings, shards);
    const range = chunkRangeFromWire(request.range);
    const decision = selectTopChunkMigration(
      shards.map(statisticsOf),
      distribution,
      range,
      chunkSelectionSettings(settings),
      new Set(this.migratingShards.keys()),
    );
    if ('skip' in decision) return { outcome: 'skipped', why: decision.skip };
    const plan = decision.move;
    if (plan.from !== request.shard) return { outcome: 'skipped', why: 'notOnShard' };
    const pattern = keyPatternOfRow(row);
    void this.issueTopChunkMove(plan, pattern, settings);
    return { outcome: 'scheduled', to: plan.to };
  }

  private async issueTopChunkMove(plan: MigrationPlan, pattern: ShardKeyPattern, settings: ClusterSettings): Promise<void> {
    const described = describe(plan, pattern);
    let details: Record<string, unknown>;
    try {
      await this.move(plan, pattern, settings);
      details = { ...described, outcome: 'moved' };
    } catch (error) {
      details = { ...described, outcome: 'failed', error: errorEntry(plan.namespace, error) };
      this.logger.info({ err: error, ns: plan.namespace }, `top chunk move of ${plan.namespace} failed: ${(error as Error).message}`);
    }
    await this.changelog
      .record(this.dataSource.manager, { what: 'balancer.topChunk', ns: plan.namespace, shard: plan.from, details })
      .catch((error: unknown) => this.logger.warn({ err: error }, `cannot record a top chunk move: ${(error as Error).message}`));
  }

  /** A round if the balancer is on and inside its window; answers whether it issued migrations. */
  private async tick(term: number): Promise<boolean> {
    if (!this.leader.isLeader) return false;
    const settings = await this.clusterSettings.get();
    if (settings.balancer.mode !== 'full') return false;
    if (!isInsideActiveWindow(settings.balancer.activeWindow, new Date())) return false;
    this.inRound = true;
    try {
      return await this.round(settings, term);
    } finally {
      this.inRound = false;
    }
  }

  /**
   * One round: snapshot, zone splits, defragmentation and chunk selection, the migration throttle,
   * the migrations in parallel, record. Answers whether it issued migrations.
   */
  private async round(settings: ClusterSettings, term: number): Promise<boolean> {
    const started = Date.now();
    let snapshot = await this.snapshot(settings);
    const splits = await this.splitter.splitAtZoneBoundaries(snapshot);
    // Splits change the chunks, not the shards' bytes: the policies read the chunks again.
    const split = new Set(splits.filter((s) => s.outcome === 'split').map((s) => s.ns));
    if (split.size > 0) snapshot = await this.withChunksReread(snapshot, split);
    const errors = [
      ...snapshot.errors,
      ...splits
        .filter((s) => s.outcome === 'failed')
        .map((s) => ({ ns: s.ns, code: 'SPLIT_FAILED', message: 'zone boundary split failed' })),
    ];
    const byNs = new Map(snapshot.collections.map((c) => [c.distribution.namespace, c]));

    // Defragmentation's migrations first; their shards are busy for the chunk selection policy.
    const busy = new Set(this.migratingShards.keys());
    const defragmenting = snapshot.collections.filter((c) => c.row.defragment_collection);
    const defragmentationPlans: MigrationPlan[] = [];
    for (const c of defragmenting) {
      await this.defragmentation.load(c.row);
      // Read, change and keep the state with no await between: the secondary loop changes it too.
      const state = this.defragmentation.current(c.row.ns);
      if (state === undefined) continue;
      const next = nextDefragmentationMigrations(
        state,
        { chunks: c.distribution.chunks, maxChunkSizeBytes: c.distribution.maxChunkSizeBytes },
        DEFAULT_DEFRAGMENTATION_SETTINGS,
        busy,
      );
      await this.defragmentation.save(next.state);
      for (const m of next.migrations) busy.add(m.from).add(m.to);
      defragmentationPlans.push(...next.migrations);
    }
    if (defragmenting.length > 0) this.secondary.signal();

    const balanced = snapshot.collections.filter((c) => !c.row.defragment_collection && c.row.balancing_enabled);
    const result = selectMigrations(
      snapshot.shards.map(statisticsOf),
      balanced.map((c) => c.distribution),
      chunkSelectionSettings(settings),
      busy,
    );
    for (const status of result.collections) {
      if (status.chunkCountBalancingInProgress) this.chunkCountInProgress.add(status.namespace);
      else this.chunkCountInProgress.delete(status.namespace);
    }

    const selected = [...defragmentationPlans, ...result.migrations];
    const selectionTimeMillis = Date.now() - started;
    // MongoDB's balancerMigrationsThrottlingMs, only before migrations (zone splits and top-chunk
    // moves are not throttled). A wake-up before or during the sleep ends the round here: the next
    // one starts at once and selects with the change seen.
    const throttleTimeMillis =
      selected.length > 0
        ? migrationThrottleMs(this.settings.TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS, this.lastMigrationAt, Date.now())
        : 0;
    if (throttleTimeMillis > 0 && !this.wakeAfterRound) await this.sleepBeforeMigrations(throttleTimeMillis);
    // Stopped (or stepped down) meanwhile: issue nothing; a new term starts from a fresh state.
    if (selected.length > 0 && term !== this.term) return false;
    const throttled = Date.now();
    const interrupted = throttleTimeMillis > 0 && this.wakeAfterRound;
    // Defragmentation counts its migrations in flight: those not issued go back to be issued again.
    if (interrupted) {
      for (const plan of defragmentationPlans) {
        await this.onDefragmentationMigration(plan, { ok: false, retryable: true, error: 'not issued: the balancer was woken' });
      }
    }
    const plans = interrupted ? [] : selected;

    const skipped = new Set<string>();
    const tooBig: RoundSplit[] = [];
    const outcomes = await Promise.all(
      plans.map(async (plan): Promise<BalancerRoundMigration> => {
        const collection = byNs.get(plan.namespace)!;
        const described = describe(plan, collection.pattern);
        if (skipped.has(plan.namespace)) return { ...described, outcome: 'skipped' };
        try {
          await this.move(plan, collection.pattern, settings);
          if (plan.reason === 'defragmentation') await this.onDefragmentationMigration(plan, { ok: true });
          return { ...described, outcome: 'moved' };
        } catch (error) {
          errors.push(errorEntry(plan.namespace, error));
          const code = error instanceof TesseraError ? error.code : 'INTERNAL';
          if (code === 'CONFLICTING_OPERATION') skipped.add(plan.namespace);
          const level = code === 'CHUNK_TOO_BIG' || code === 'CONFLICTING_OPERATION' ? 'info' : 'warn';
          this.logger[level](
            { err: error, ns: plan.namespace },
            `balancer migration of ${plan.namespace} ${plan.from} -> ${plan.to} failed: ${(error as Error).message}`,
          );
          if (plan.reason === 'defragmentation') {
            const retryable = error instanceof TesseraError && error.retryable;
            await this.onDefragmentationMigration(plan, { ok: false, retryable, error: (error as Error).message });
          } else if (code === 'CHUNK_TOO_BIG') {
            tooBig.push(await this.splitter.splitOrMarkJumbo(plan, collection, snapshot.shards));
          }
          return { ...described, outcome: 'failed' };
        }
      }),
    );
    const statuses: CollectionBalanceStatus[] = [
      ...defragmenting.map((c) => ({
        namespace: c.distribution.namespace,
        balancerCompliant: false,
        firstComplianceViolation: 'defragmentingChunks' as const,
        jumboChunksSkipped: 0,
        chunkCountBalancingInProgress: false,
      })),
      ...result.collections,
    ];
    const ended = Date.now();
    if (plans.length > 0) this.lastMigrationAt = ended;
    const migrationTimeMillis = plans.length > 0 ? ended - throttled : 0;
    this.lastRound = {
      startedAt: new Date(started).toISOString(),
      durationMs: ended - started,
      selectionTimeMillis,
      throttleTimeMillis: throttled - started - selectionTimeMillis,
      migrationTimeMillis,
      migrations: outcomes,
      errors,
    };
    await this.record(statuses, outcomes, [...splits, ...tooBig], errors, snapshot.collections.length, interrupted);
    return plans.length > 0;
  }

  /** Issues one migration through moveRange, with its reason, counting its shards busy meanwhile. */
  private async move(plan: MigrationPlan, pattern: ShardKeyPattern, settings: ClusterSettings): Promise<void> {
    const shards = [plan.from, plan.to];
    for (const s of shards) this.migratingShards.set(s, (this.migratingShards.get(s) ?? 0) + 1);
    try {
      await this.migrations.moveRange(
        {
          ns: plan.namespace,
          min: wireKey(pattern, plan.range.min),
          toShard: plan.to,
          // attemptToBalanceJumboChunks: a chunk over the size limit moves rather than being refused.
          forceJumbo: settings.balancer.attemptToBalanceJumboChunks,
          waitForDelete: settings.balancer.waitForDelete,
        },
        { reason: plan.reason },
      );
    } finally {
      for (const s of shards) {
        const n = (this.migratingShards.get(s) ?? 1) - 1;
        if (n <= 0) this.migratingShards.delete(s);
        else this.migratingShards.set(s, n);
      }
    }
  }

  private async onDefragmentationMigration(plan: MigrationPlan, outcome: DefragmentationOutcome): Promise<void> {
    const state = this.defragmentation.current(plan.namespace);
    if (state === undefined) return;
    const action: DefragmentationAction = { kind: 'migrate', namespace: plan.namespace, shard: plan.from, to: plan.to, range: plan.range };
    await this.defragmentation.save(onDefragmentationOutcome(state, action, outcome));
    this.secondary.signal();
  }

  private async record(
    statuses: readonly CollectionBalanceStatus[],
    migrations: BalancerRoundMigration[],
    splits: RoundSplit[],
    errors: RoundError[],
    collections: number,
    interrupted: boolean,
  ): Promise<void> {
    const { durationMs, selectionTimeMillis, throttleTimeMillis, migrationTimeMillis } = this.lastRound!;
    const details: Record<string, unknown> = {
      collections,
      migrations,
      errors,
      durationMs,
      selectionTimeMillis,
      throttleTimeMillis,
      migrationTimeMillis,
    };
    if (splits.length > 0) details.splits = splits;
    if (migrations.length === 0 && splits.length === 0) {
      const why = interrupted
        ? 'woken before its migrations: the next round selects again at once'
        : collections === 0
          ? 'no sharded collection has balancing enabled'
          : statuses.every((s) => s.balancerCompliant)
            ? 'every collection is balanced'
            : statuses.some((s) => s.firstComplianceViolation === 'defragmentingChunks')
              ? 'defragmentation has no migration to issue now (merges and data sizes run in the secondary loop)'
              : 'no migration possible (shards busy, jumbo chunks or no eligible recipient)';
      details.why = why;
      details.collectionStatus = statuses.map((s) => ({
        ns: s.namespace,
        compliant: s.balancerCompliant,
        violation: s.firstComplianceViolation,
        jumboChunksSkipped: s.jumboChunksSkipped,
      }));
      const key = JSON.stringify([why, errors.map((e) => e.code), details.collectionStatus]);
      if (key === this.lastIdleReason) return;
      this.lastIdleReason = key;
    } else {
      this.lastIdleReason = undefined;
    }
    await this.changelog.record(this.dataSource.manager, { what: 'balancer.round', details });
  }

  private async snapshot(settings: ClusterSettings): Promise<Snapshot> {
    const shards = await this.statistics.shards();
    const rows = await this.statistics.balancedCollections();
    try {
      const distributions = await this.statistics.distributions(rows, settings, shards, (row) => ({
        chunkCountBalancingInProgress: this.chunkCountInProgress.has(row.ns),
      }));
      const collections = rows.map((row, i) => ({
        row,
        distribution: distributions[i]!,
        pattern: keyPatternOfRow(row),
        generation: generationOfRow(row),
      }));
      return { shards, collections, errors: [] };
    } catch (error) {
      // A shard that does not answer its statsForBalancing leaves every collection out of the round.
      this.logger.warn({ err: error }, `balancer skips this round's collections: ${(error as Error).message}`);
      return { shards, collections: [], errors: rows.map((row) => errorEntry(row.ns, error)) };
    }
  }

  /** The snapshot with the chunks of `namespaces` read again (after splits). */
  private async withChunksReread(snapshot: Snapshot, namespaces: ReadonlySet<string>): Promise<Snapshot> {
    const collections = await Promise.all(
      snapshot.collections.map(async (c) =>
        namespaces.has(c.row.ns) ? { ...c, distribution: { ...c.distribution, chunks: await this.statistics.chunks(c.row) } } : c,
      ),
    );
    return { ...snapshot, collections };
  }
}

function chunkSelectionSettings(settings: ClusterSettings): ChunkSelectionSettings {
  return { ...DEFAULT_CHUNK_SELECTION_SETTINGS, mode: settings.balancer.policy === 'chunkCount' ? 'chunkCountThreshold' : 'dataSize' };
}
