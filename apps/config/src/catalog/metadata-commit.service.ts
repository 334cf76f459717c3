import { Inject, Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import {
  type Chunk,
  type ChunkRange,
  type ChunkVersion,
  type ClusterTimestamp,
  type CollectionGeneration,
  type ShardKeyPattern,
  TesseraError,
  chunkHistoryWindowSecs,
  chunkRangeToString,
  makeChunkVersion,
  mergeChunks,
  moveChunk,
  splitChunk,
  trimChunkHistory,
} from '@tessera/core';
import { SETTINGS, parseWith } from '@tessera/platform';
import {
  type ClearJumboRequest,
  type CommitMergeRequest,
  type CommitMigrationRequest,
  type CommitResult,
  type CommitSplitRequest,
  type MarkJumboRequest,
  type RecordChunkSizeEstimateRequest,
  chunkRangeFromWire,
  clearJumboRequestSchema,
  commitMergeRequestSchema,
  commitMigrationRequestSchema,
  commitSplitRequestSchema,
  markJumboRequestSchema,
  recordChunkSizeEstimateRequestSchema,
  shardKeyFromWire,
} from '@tessera/protocol';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { ActiveMigrationStore } from '../migration/active-migration.store.js';
import { findCollection, readCollectionVersion } from './catalog-read.service.js';
import { type ChunkScope, ChunkCatalogStore, type SizeEstimate, type StoredChunk } from './chunk-catalog.store.js';
import { generationOfRow, keyPatternOfRow } from './catalog-rows.js';
import {
  checkExpectedVersion,
  checkGeneration,
  commitResult,
  sortByMin,
  checkIsChunk,
  checkKey,
  checkMergeRun,
  checkRange,
  checkSplitPoints,
  describeChunk,
} from './commit-checks.js';

/** What a commit sees once it holds the collection's row lock (`db` is its transaction). */
interface LockedCollection extends ChunkScope {
  db: EntityManager;
  ns: string;
  pattern: ShardKeyPattern;
  /** The collection version, read under the lock. */
  cv: ChunkVersion;
}

/**
 * Metadata commits (MongoDB's `_configsvrCommitChunkSplit`, `...Merge`, `...Migration`,
 * `clearJumboFlag`): each is one Postgres transaction that locks the collection's row
 * (`SELECT ... FOR UPDATE`, which serialises every commit on the collection across config
 * processes), compares the collection version with the caller's `expectedCollectionVersion`,
 * validates the request against the chunk rows, ticks ConfigTime, writes the chunks with the
 * version bumps of libs/core and a changelog row. Any error rolls everything back. See README.md.
 */
@Injectable()
export class MetadataCommitService {
  /** How much chunk history a migration keeps (see `trimChunkHistory`). */
  private readonly historyWindowSecs: number;

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
    private readonly chunks: ChunkCatalogStore,
    private readonly migrations: ActiveMigrationStore,
    @Inject(SETTINGS) settings: ConfigSettings,
  ) {
    this.historyWindowSecs = chunkHistoryWindowSecs(
      settings.TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS,
      settings.TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS,
    );
  }

  /**
   * Splits one chunk of `shard` at `splitPoints`: piece k gets <Mcv, mcv + k>.
   * Throws `BAD_VALUE` (bad request, range not a chunk, chunk on another shard, split point outside
   * the chunk, on a bound or not increasing), `NAMESPACE_NOT_FOUND`, `STALE_EPOCH`, `CONFLICTING_OPERATION`.
   */
  async commitSplit(request: CommitSplitRequest): Promise<CommitResult> {
    const input = parseWith(commitSplitRequestSchema, request, 'commitSplit request');
    const range = chunkRangeFromWire(input.range);
    const points = input.splitPoints.map((p, i) => shardKeyFromWire(p, `splitPoints[${i}]`));
    return this.withCollection(input.ns, input.expectedCollectionVersion, async (c) => {
      checkRange(c.ns, c.pattern, range);
      points.forEach((p, i) => checkKey(c.ns, c.pattern, p, `splitPoints[${i}]`));
      const { chunk, id, estimate } = await this.exactChunk(c, range, input.shard);
      checkSplitPoints(c.ns, chunk, points);
      await this.checkNotMigrating(c, range, 'split');
      const pieces = splitChunk(chunk, points, c.cv).map(({ jumbo: _jumbo, ...piece }): Chunk => piece);
      const configTime = await this.tick(c);
      await this.chunks.replace(c, c.pattern, [id], pieces);
      await this.changelog.record(c.db, {
        what: pieces.length === 2 ? 'split' : 'multi-split',
        ns: c.ns,
        shard: chunk.shard,
        details: {
          // The pieces have no estimate: how the chunk's bytes fall on either side of a split
          // point is known only to the shard, which measures each piece when it is next tested.
          before: describeChunk(chunk, estimate),
          after: pieces.map((p) => describeChunk(p)),
          pieces: pieces.length,
          configTime,
          ...(input.reason === undefined ? {} : { reason: input.reason }),
        },
      });
      return commitResult(c.ns, c.cv, pieces, configTime);
    });
  }

  /**
   * Merges the contiguous chunks of `shard` that exactly cover `range` into one chunk
   * <Mcv, mcv + 1> with a fresh history. Throws `BAD_VALUE` naming the chunk that breaks the run
   * (a bound inside a chunk, a gap, a chunk on another shard, a single chunk), `CONFLICTING_OPERATION`
   * while the range is being migrated, and as `commitSplit`.
   */
  async commitMerge(request: CommitMergeRequest): Promise<CommitResult> {
    const input = parseWith(commitMergeRequestSchema, request, 'commitMerge request');
    const range = chunkRangeFromWire(input.range);
    return this.withCollection(input.ns, input.expectedCollectionVersion, async (c) => {
      checkRange(c.ns, c.pattern, range);
      const run = await this.chunks.covering(c, range);
      const chunks = run.map((r) => r.chunk);
      checkMergeRun(c.ns, range, input.shard, chunks);
      await this.checkNotMigrating(c, range, 'merged');
      const configTime = await this.tick(c);
      const merged = mergeChunks(chunks, c.cv, configTime);
      await this.chunks.replace(
        c,
        c.pattern,
        run.map((r) => r.id),
        [merged],
      );
      const estimate = mergedEstimate(run);
      if (estimate !== undefined) await this.chunks.recordSizeEstimateAt(c, merged.range.min, estimate);
      await this.changelog.record(c.db, {
        what: 'merge',
        ns: c.ns,
        shard: merged.shard,
        details: {
          before: run.map((r) => describeChunk(r.chunk, r.estimate)),
          merged: describeChunk(merged, estimate),
          count: chunks.length,
          configTime,
          ...(input.reason === undefined ? {} : { reason: input.reason }),
        },
      });
      return commitResult(c.ns, c.cv, [merged], configTime);
    });
  }

  /**
   * Commits a migration: the chunk moves from `donor` to `recipient` at <Mcv + 1, 0> with a
   * history entry valid after this commit's ConfigTime; another chunk the donor keeps (the
   * control chunk) gets <Mcv + 1, 1>. Throws `SHARD_NOT_FOUND` for an unregistered recipient,
   * `CONFLICTING_OPERATION` when the collection does not allow migrations, and as `commitSplit`.
   */
  async commitMigration(request: CommitMigrationRequest): Promise<CommitResult> {
    const input = parseWith(commitMigrationRequestSchema, request, 'commitMigration request');
    const range = chunkRangeFromWire(input.range);
    if (input.donor === input.recipient) {
      throw new TesseraError('BAD_VALUE', `A migration of ${input.ns} needs a recipient other than the donor (${input.donor}).`, {
        details: { ns: input.ns, problem: 'sameShard', donor: input.donor, recipient: input.recipient },
      });
    }
    return this.withCollection(input.ns, input.expectedCollectionVersion, async (c) => {
      await this.checkMigrationAllowed(c, input.recipient);
      if (input.migrationId !== undefined && !(await this.recordCommitDecision(c, input.migrationId))) {
        // A retry of a commit that landed: nothing more to do.
        return { ns: c.ns, chunks: [], collectionVersion: c.cv, configTime: this.clock.now().configTime };
      }
      checkRange(c.ns, c.pattern, range);
      const { chunk, id, estimate } = await this.exactChunk(c, range, input.donor);
      const controlRow = await this.chunks.another(c, input.donor, id);
      const configTime = await this.tick(c);
      const { moved: withHistory, control } = moveChunk(chunk, input.recipient, c.cv, configTime, controlRow?.chunk);
      const moved = { ...withHistory, history: trimChunkHistory(withHistory.history, configTime, this.historyWindowSecs) };
      await this.chunks.move(c, id, moved);
      if (control !== undefined && controlRow !== undefined) await this.chunks.setVersion(c, controlRow.id, control);
      // Why the migration was started (the balancer's reason), kept in the commit's row.
      const reason = input.migrationId === undefined ? undefined : await this.migrations.reasonOf(c.db, input.migrationId);
      await this.changelog.record(c.db, {
        what: 'moveChunk.commit',
        ns: c.ns,
        shard: input.donor,
        details: {
          migrationId: input.migrationId ?? null,
          donor: input.donor,
          recipient: input.recipient,
          // Before and after, so a placement event shows both without reading older rows.
          // A move and a version bump leave the data of a chunk as it was, so each keeps its estimate.
          before: [describeChunk(chunk, estimate), ...(controlRow ? [describeChunk(controlRow.chunk, controlRow.estimate)] : [])],
          chunk: describeChunk(moved, estimate),
          controlChunk: control ? describeChunk(control, controlRow?.estimate) : null,
          configTime,
          ...(reason === undefined ? {} : { reason }),
        },
      });
      return commitResult(c.ns, c.cv, control ? sortByMin([moved, control]) : [moved], configTime);
    });
  }

  /**
   * A migration commits only while its collection allows migrations, and only to a registered
   * recipient, held (KEY SHARE) so that it cannot be removed before the commit ends.
   */
  private async checkMigrationAllowed(c: LockedCollection, recipient: string): Promise<void> {
    if (!c.row.allow_migrations) {
      throw new TesseraError('CONFLICTING_OPERATION', `Migrations of ${c.ns} are not allowed now (allowMigrations is false).`, {
        details: { ns: c.ns, problem: 'migrationsNotAllowed' },
      });
    }
    if (!(await this.chunks.holdShard(c, recipient))) {
      throw new TesseraError('SHARD_NOT_FOUND', `The recipient shard ${recipient} of a migration of ${c.ns} is not registered.`, {
        details: { ns: c.ns, problem: 'unknownRecipient', shard: recipient },
      });
    }
  }

  /**
   * Records that migration `id` commits, in the commit's transaction. Answers false when it had
   * already committed; throws `CONFLICTING_OPERATION` when it was decided aborted (its donor
   * recovered and asked before this commit arrived, or its record was settled).
   */
  private async recordCommitDecision(c: LockedCollection, id: string): Promise<boolean> {
    const recorded = await this.migrations.recordCommit(c.db, id);
    if (recorded !== undefined) return recorded;
    throw new TesseraError('CONFLICTING_OPERATION', `Migration ${id} of ${c.ns} was already decided aborted; it cannot commit.`, {
      details: { ns: c.ns, migrationId: id, problem: 'migrationAborted' },
    });
  }

  /**
   * Clears a chunk's jumbo flag and bumps it to <Mcv, mcv + 1> so caches refresh. A chunk that
   * is not jumbo is left alone (no bump; the result lists no chunk). Throws as `commitSplit`.
   */
  async clearJumbo(request: ClearJumboRequest): Promise<CommitResult> {
    const input = parseWith(clearJumboRequestSchema, request, 'clearJumbo request');
    const range = chunkRangeFromWire(input.range);
    return this.withCollection(input.ns, input.expectedCollectionVersion, async (c) => {
      checkRange(c.ns, c.pattern, range);
      const { chunk, id, estimate } = await this.exactChunk(c, range);
      if (!chunk.jumbo) return { ns: c.ns, chunks: [], collectionVersion: c.cv, configTime: this.clock.now().configTime };
      const configTime = await this.tick(c);
      const cleared: Chunk = {
        range: chunk.range,
        shard: chunk.shard,
        history: chunk.history,
        version: makeChunkVersion(c.cv, c.cv.major, c.cv.minor + 1),
      };
      await this.chunks.setVersion(c, id, cleared, { jumbo: false });
      await this.changelog.record(c.db, {
        what: 'clearJumboFlag',
        ns: c.ns,
        shard: chunk.shard,
        details: { chunk: describeChunk(cleared, estimate), configTime },
      });
      return commitResult(c.ns, c.cv, [cleared], configTime);
    });
  }

  /**
   * Marks a chunk that could not be split as jumbo (the balancer then leaves it alone). Only the
   * generation is checked and no version is bumped: routing does not change. Idempotent.
   * Throws `BAD_VALUE`, `NAMESPACE_NOT_FOUND`, `STALE_EPOCH`.
   */
  async markJumbo(request: MarkJumboRequest): Promise<CommitResult> {
    const input = parseWith(markJumboRequestSchema, request, 'markJumbo request');
    const range = chunkRangeFromWire(input.range);
    return this.withCollection(input.ns, input.generation, async (c) => {
      checkRange(c.ns, c.pattern, range);
      const { chunk, id, estimate } = await this.exactChunk(c, range);
      if (chunk.jumbo) return { ns: c.ns, chunks: [], collectionVersion: c.cv, configTime: this.clock.now().configTime };
      const configTime = await this.tick(c);
      await this.chunks.markJumbo(c, id);
      const marked: Chunk = { ...chunk, jumbo: true };
      await this.changelog.record(c.db, {
        what: 'markJumbo',
        ns: c.ns,
        shard: chunk.shard,
        details: { chunk: describeChunk(marked, estimate), configTime },
      });
      return commitResult(c.ns, c.cv, [marked], configTime);
    });
  }

  /**
   * Records a shard's estimate of a chunk's data size and, when it counted them, documents (for
   * the balancer's statistics and the control plane's sizes); a report without a count clears
   * the older count, which described an older measurement. Not routing metadata: no collection
   * lock, no version bump, no ConfigTime tick, no changelog row. Throws `BAD_VALUE`, `NAMESPACE_NOT_FOUND`, `STALE_EPOCH`.
   */
  async recordChunkSizeEstimate(request: RecordChunkSizeEstimateRequest): Promise<{ ok: 1 }> {
    const input = parseWith(recordChunkSizeEstimateRequestSchema, request, 'recordChunkSizeEstimate request');
    const range = chunkRangeFromWire(input.range);
    return this.dataSource.transaction(async (manager) => {
      const row = await findCollection(manager, input.ns);
      const generation = generationOfRow(row);
      checkGeneration(input.ns, input.generation, generation);
      const pattern = keyPatternOfRow(row);
      checkRange(input.ns, pattern, range);
      const scope = { db: manager, row, generation };
      const found = await this.chunks.holding(scope, range, 'FOR UPDATE');
      checkIsChunk(input.ns, range, found?.chunk);
      await this.chunks.recordSizeEstimate(scope, found!.id, {
        bytes: input.estimatedSizeBytes,
        documents: input.estimatedDocuments ?? null,
      });
      return { ok: 1 as const };
    });
  }

  /**
   * Refuses a split or merge of a range that overlaps a migration's (MongoDB: the migration holds
   * the collection's lock): the migration's commit would find its chunk gone, after cloning and
   * holding its critical section for nothing. `CONFLICTING_OPERATION` with `problem: 'migrating'`
   * and the migration's id; the caller tries again once it has ended.
   */
  private async checkNotMigrating(c: LockedCollection, range: ChunkRange, verb: 'split' | 'merged'): Promise<void> {
    const migrationId = await this.chunks.migrationOverlapping(c, range);
    if (migrationId !== undefined) {
      throw new TesseraError(
        'CONFLICTING_OPERATION',
        `${chunkRangeToString(range)} of ${c.ns} is being migrated; it cannot be ${verb} now.`,
        {
          details: { ns: c.ns, problem: 'migrating', migrationId },
        },
      );
    }
  }

  /**
   * Runs `fn` in one transaction holding the collection's row lock, after the compare-and-set:
   * a full `ChunkVersion` is compared exactly; a bare generation only by generation.
   */
  private async withCollection<T>(
    ns: string,
    expected: ChunkVersion | CollectionGeneration,
    fn: (c: LockedCollection) => Promise<T>,
  ): Promise<T> {
    return this.dataSource.transaction(async (manager) => {
      const row = await findCollection(manager, ns, { forUpdate: true });
      const generation = generationOfRow(row);
      const cv = await readCollectionVersion(manager, row.uuid, generation);
      if ('major' in expected) checkExpectedVersion(ns, expected, cv);
      else checkGeneration(ns, expected, generation);
      return fn({ db: manager, ns, row, generation, pattern: keyPatternOfRow(row), cv });
    });
  }

  /** The chunk that is exactly `range` (on `shard` if given). Throws `BAD_VALUE` as `checkIsChunk`. */
  private async exactChunk(c: LockedCollection, range: ChunkRange, shard?: string): Promise<StoredChunk> {
    const found = await this.chunks.holding(c, range);
    checkIsChunk(c.ns, range, found?.chunk, shard);
    return found!;
  }

  private async tick(c: LockedCollection): Promise<ClusterTimestamp> {
    return (await this.clock.tick(c.db)).configTime;
  }
}

/**
 * A merged chunk's estimate: the sum of its parts' when every part has one (a merge moves no
 * data); none when a part has none, since a partial sum would understate it. Documents likewise.
 */
function mergedEstimate(run: readonly StoredChunk[]): SizeEstimate | undefined {
  if (!run.every((r) => r.estimate !== undefined)) return undefined;
  const estimates = run.map((r) => r.estimate!);
  const counted = estimates.every((e) => e.documents !== null);
  return {
    bytes: estimates.reduce((n, e) => n + e.bytes, 0),
    documents: counted ? estimates.reduce((n, e) => n + e.documents!, 0) : null,
  };
}
