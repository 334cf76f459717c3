import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import {
  type Chunk,
  type ChunkRange,
  type ChunkVersion,
  type ClusterTimestamp,
  type CollectionGeneration,
  type ShardKey,
  type ShardKeyPattern,
  TesseraError,
  chunkRangeToString,
  encodeKey,
  isSameGeneration,
  makeChunkVersion,
  mergeChunks,
  moveChunk,
  splitChunk,
} from '@tessera/core';
import { parseWith } from '@tessera/platform';
import {
  type ClearJumboRequest,
  type CommitMergeRequest,
  type CommitMigrationRequest,
  type CommitResult,
  type CommitSplitRequest,
  type MarkJumboRequest,
  type RecordChunkSizeEstimateRequest,
  chunkRangeFromWire,
  chunkToWire,
  clearJumboRequestSchema,
  commitMergeRequestSchema,
  commitMigrationRequestSchema,
  commitSplitRequestSchema,
  markJumboRequestSchema,
  recordChunkSizeEstimateRequestSchema,
  shardKeyFromWire,
} from '@tessera/protocol';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { findCollection, readCollectionVersion } from './catalog-read.service.js';
import { type ChunkRow, type CollectionRow, chunkFromRow, generationOfRow, insertChunkRows, keyPatternOfRow } from './catalog-rows.js';
import {
  checkExpectedVersion,
  checkIsChunk,
  checkKey,
  checkMergeRun,
  checkRange,
  checkSplitPoints,
  describeChunk,
} from './commit-checks.js';

/** What a commit sees once it holds the collection's row lock. */
interface LockedCollection {
  manager: EntityManager;
  ns: string;
  row: CollectionRow;
  generation: CollectionGeneration;
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
  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
  ) {}

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
      const { chunk, id } = await this.exactChunk(c, range, input.shard);
      checkSplitPoints(c.ns, chunk, points);
      await this.checkNotMigrating(c, range, 'split');
      const pieces = splitChunk(chunk, points, c.cv).map(({ jumbo: _jumbo, ...piece }): Chunk => piece);
      const configTime = await this.tick(c);
      await c.manager.query('DELETE FROM chunks WHERE id = $1', [id]);
      await insertChunkRows(c.manager, c.row.uuid, c.pattern, pieces);
      await this.changelog.record(c.manager, {
        what: pieces.length === 2 ? 'split' : 'multi-split',
        ns: c.ns,
        shard: chunk.shard,
        details: {
          before: describeChunk(chunk),
          after: pieces.map(describeChunk),
          pieces: pieces.length,
          configTime,
          ...(input.reason === undefined ? {} : { reason: input.reason }),
        },
      });
      return result(c, pieces, configTime);
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
      // The chunk holding range.min, then every chunk starting below range.max (the min index).
      const rows: ChunkRow[] = await c.manager.query(
        `SELECT * FROM chunks WHERE collection_uuid = $1 AND min < $3
           AND min >= (SELECT min FROM chunks WHERE collection_uuid = $1 AND min <= $2 ORDER BY min DESC LIMIT 1)
         ORDER BY min`,
        [c.row.uuid, bytes(range.min), bytes(range.max)],
      );
      const chunks = rows.map((r) => chunkFromRow(r, c.generation));
      checkMergeRun(c.ns, range, input.shard, chunks);
      await this.checkNotMigrating(c, range, 'merged');
      const configTime = await this.tick(c);
      const merged = mergeChunks(chunks, c.cv, configTime);
      await c.manager.query('DELETE FROM chunks WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
      await insertChunkRows(c.manager, c.row.uuid, c.pattern, [merged]);
      await this.changelog.record(c.manager, {
        what: 'merge',
        ns: c.ns,
        shard: merged.shard,
        details: {
          before: chunks.map(describeChunk),
          merged: describeChunk(merged),
          count: chunks.length,
          configTime,
          ...(input.reason === undefined ? {} : { reason: input.reason }),
        },
      });
      return result(c, [merged], configTime);
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
      if (!c.row.allow_migrations) {
        throw new TesseraError('CONFLICTING_OPERATION', `Migrations of ${c.ns} are not allowed now (allowMigrations is false).`, {
          details: { ns: c.ns, problem: 'migrationsNotAllowed' },
        });
      }
      // KEY SHARE: the recipient cannot be removed before this commit ends.
      const recipients: unknown[] = await c.manager.query('SELECT name FROM shards WHERE name = $1 FOR KEY SHARE', [input.recipient]);
      if (recipients.length === 0) {
        throw new TesseraError('SHARD_NOT_FOUND', `The recipient shard ${input.recipient} of a migration of ${c.ns} is not registered.`, {
          details: { ns: c.ns, problem: 'unknownRecipient', shard: input.recipient },
        });
      }
      if (input.migrationId !== undefined && !(await recordCommitDecision(c.manager, input.migrationId, c.ns))) {
        // A retry of a commit that landed: nothing more to do.
        return { ns: c.ns, chunks: [], collectionVersion: c.cv, configTime: this.clock.now().configTime };
      }
      checkRange(c.ns, c.pattern, range);
      const { chunk, id } = await this.exactChunk(c, range, input.donor);
      // Why the migration was started (the balancer's reason), kept in the commit's row.
      const reasons: Array<{ reason: string | null }> =
        input.migrationId === undefined
          ? []
          : await c.manager.query('SELECT reason FROM active_migrations WHERE id = $1', [input.migrationId]);
      const reason = reasons[0]?.reason ?? undefined;
      const controlRows: ChunkRow[] = await c.manager.query(
        'SELECT * FROM chunks WHERE collection_uuid = $1 AND shard = $2 AND id <> $3 LIMIT 1',
        [c.row.uuid, input.donor, id],
      );
      const controlRow = controlRows[0];
      const configTime = await this.tick(c);
      const { moved, control } = moveChunk(chunk, input.recipient, c.cv, configTime, controlRow && chunkFromRow(controlRow, c.generation));
      await c.manager.query('UPDATE chunks SET shard = $2, major = $3, minor = $4, history = $5 WHERE id = $1', [
        id,
        moved.shard,
        moved.version.major,
        moved.version.minor,
        JSON.stringify(moved.history),
      ]);
      if (control !== undefined && controlRow !== undefined) {
        await c.manager.query('UPDATE chunks SET major = $2, minor = $3 WHERE id = $1', [
          controlRow.id,
          control.version.major,
          control.version.minor,
        ]);
      }
      await this.changelog.record(c.manager, {
        what: 'moveChunk.commit',
        ns: c.ns,
        shard: input.donor,
        details: {
          migrationId: input.migrationId ?? null,
          donor: input.donor,
          recipient: input.recipient,
          // Before and after, so a placement event shows both without reading older rows.
          before: [describeChunk(chunk), ...(controlRow ? [describeChunk(chunkFromRow(controlRow, c.generation))] : [])],
          chunk: describeChunk(moved),
          controlChunk: control ? describeChunk(control) : null,
          configTime,
          ...(reason === undefined ? {} : { reason }),
        },
      });
      return result(c, control ? sortByMin([moved, control]) : [moved], configTime);
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
      const { chunk, id } = await this.exactChunk(c, range);
      if (!chunk.jumbo) return { ns: c.ns, chunks: [], collectionVersion: c.cv, configTime: this.clock.now().configTime };
      const configTime = await this.tick(c);
      const cleared: Chunk = {
        range: chunk.range,
        shard: chunk.shard,
        history: chunk.history,
        version: makeChunkVersion(c.cv, c.cv.major, c.cv.minor + 1),
      };
      await c.manager.query('UPDATE chunks SET jumbo = false, major = $2, minor = $3 WHERE id = $1', [
        id,
        cleared.version.major,
        cleared.version.minor,
      ]);
      await this.changelog.record(c.manager, {
        what: 'clearJumboFlag',
        ns: c.ns,
        shard: chunk.shard,
        details: { chunk: describeChunk(cleared), configTime },
      });
      return result(c, [cleared], configTime);
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
      const { chunk, id } = await this.exactChunk(c, range);
      if (chunk.jumbo) return { ns: c.ns, chunks: [], collectionVersion: c.cv, configTime: this.clock.now().configTime };
      const configTime = await this.tick(c);
      await c.manager.query('UPDATE chunks SET jumbo = true WHERE id = $1', [id]);
      const marked: Chunk = { ...chunk, jumbo: true };
      await this.changelog.record(c.manager, {
        what: 'markJumbo',
        ns: c.ns,
        shard: chunk.shard,
        details: { chunk: describeChunk(marked), configTime },
      });
      return result(c, [marked], configTime);
    });
  }

  /**
   * Records a shard's estimate of a chunk's data size (for auto-split and the balancer's
   * statistics). Not routing metadata: no collection lock, no version bump, no ConfigTime tick,
   * no changelog row. Throws `BAD_VALUE`, `NAMESPACE_NOT_FOUND`, `STALE_EPOCH`.
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
      const found = await chunkHolding({ manager, row, generation }, range, 'FOR UPDATE');
      const id = found?.id;
      checkIsChunk(input.ns, range, found?.chunk);
      await manager.query('UPDATE chunks SET estimated_size_bytes = $2 WHERE id = $1', [id, input.estimatedSizeBytes]);
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
    const migrating: Array<{ id: string }> = await c.manager.query(
      'SELECT id FROM active_migrations WHERE collection_uuid = $1 AND min < $3 AND max > $2 LIMIT 1',
      [c.row.uuid, bytes(range.min), bytes(range.max)],
    );
    if (migrating.length > 0) {
      throw new TesseraError(
        'CONFLICTING_OPERATION',
        `${chunkRangeToString(range)} of ${c.ns} is being migrated; it cannot be ${verb} now.`,
        {
          details: { ns: c.ns, problem: 'migrating', migrationId: migrating[0]!.id },
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
      return fn({ manager, ns, row, generation, pattern: keyPatternOfRow(row), cv });
    });
  }

  /** The chunk that is exactly `range` (on `shard` if given). Throws `BAD_VALUE` as `checkIsChunk`. */
  private async exactChunk(c: LockedCollection, range: ChunkRange, shard?: string): Promise<{ chunk: Chunk; id: string }> {
    const found = await chunkHolding(c, range);
    checkIsChunk(c.ns, range, found?.chunk, shard);
    return found as { chunk: Chunk; id: string };
  }

  private async tick(c: LockedCollection): Promise<ClusterTimestamp> {
    return (await this.clock.tick(c.manager)).configTime;
  }
}

/**
 * Records that migration `id` commits, in the commit's transaction. Answers false when it had
 * already committed; throws `CONFLICTING_OPERATION` when it was decided aborted (its donor
 * recovered and asked before this commit arrived).
 */
async function recordCommitDecision(manager: EntityManager, id: string, ns: string): Promise<boolean> {
  const inserted: unknown[] = await manager.query(
    `INSERT INTO migration_decisions (id, decision) VALUES ($1, 'committed') ON CONFLICT (id) DO NOTHING RETURNING id`,
    [id],
  );
  if (inserted.length > 0) return true;
  const rows: Array<{ decision: string }> = await manager.query('SELECT decision FROM migration_decisions WHERE id = $1', [id]);
  if (rows[0]?.decision === 'committed') return false;
  throw new TesseraError('CONFLICTING_OPERATION', `Migration ${id} of ${ns} was already decided aborted; it cannot commit.`, {
    details: { ns, migrationId: id, problem: 'migrationAborted' },
  });
}

/** The chunk holding `range.min` (the last chunk starting at or below it), through the min index. */
async function chunkHolding(
  c: Pick<LockedCollection, 'manager' | 'row' | 'generation'>,
  range: ChunkRange,
  lock = '',
): Promise<{ chunk: Chunk; id: string } | undefined> {
  const rows: ChunkRow[] = await c.manager.query(
    `SELECT * FROM chunks WHERE collection_uuid = $1 AND min <= $2 ORDER BY min DESC LIMIT 1 ${lock}`,
    [c.row.uuid, bytes(range.min)],
  );
  const row = rows[0];
  return row && { chunk: chunkFromRow(row, c.generation), id: row.id };
}

function checkGeneration(ns: string, expected: CollectionGeneration, current: CollectionGeneration): void {
  if (isSameGeneration(expected, current)) return;
  throw new TesseraError(
    'STALE_EPOCH',
    `The request for ${ns} names generation ${expected.epoch}, but the collection is now ${current.epoch}; refresh fully.`,
    {
      details: { ns, problem: 'staleEpoch', expected, current },
    },
  );
}

/** The commit's answer: the written chunks and the collection version after it (the highest version seen). */
function result(c: LockedCollection, written: readonly Chunk[], configTime: ClusterTimestamp): CommitResult {
  let collectionVersion = c.cv;
  for (const chunk of written) {
    const v = chunk.version;
    if (v.major > collectionVersion.major || (v.major === collectionVersion.major && v.minor > collectionVersion.minor))
      collectionVersion = v;
  }
  return { ns: c.ns, chunks: written.map(chunkToWire), collectionVersion, configTime };
}

function sortByMin(chunks: Chunk[]): Chunk[] {
  return chunks.sort((a, b) => Buffer.compare(bytes(a.range.min), bytes(b.range.min)));
}

function bytes(key: ShardKey): Buffer {
  return Buffer.from(encodeKey(key));
}
