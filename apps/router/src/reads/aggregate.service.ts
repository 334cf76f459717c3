import { Injectable } from '@nestjs/common';
import { type Collation, TesseraError, type Value, type ValueObject } from '@tessera/core';
import { timeLimitField } from '@tessera/platform';
import {
  type SplitPipeline,
  checkPipeline,
  collectionsRead,
  compileSort,
  distinctValues,
  isDocument,
  runPipeline,
  splitPipeline,
} from '@tessera/query';
import { errorFromPublic, fromWire, toWire } from '../api/extended-json.js';
import { WriteService } from '../writes/write.service.js';
import { IndexesService } from '../indexes/indexes.service.js';
import { type MergeStatement, type MergeTarget, mergeStatement, parseMergeStage } from './merge-stage.js';
import { OutStage, parseOutStage } from './out-stage.js';
import type { AggregateBody } from '../api/request-schemas.js';
import { databaseOf } from '../api/namespace.js';
import { ClusterRoutingService } from '../routing/cluster-routing.service.js';
import { RouterSessions } from '../sessions/router-sessions.service.js';
import { routeFilter } from '../writes/write-targeting.js';
import { timestampToWire } from '../clock/cluster-time-wire.js';
import { type CursorResponse, DEFAULT_BATCH_SIZE, QueryService, collationOf, targetingFilter } from './query.service.js';
import { RouterCursor, type ShardBatch } from './router-cursor.js';

/** Documents asked of a shard per batch while the router drains the shards' results for its merge. */
const DRAIN_BATCH_SIZE = 10_000;
/** Results `$merge` writes per update (or insert) command. */
const WRITE_BATCH_SIZE = 1_000;

/** How a pipeline runs: the split, the shards it targets, and where the merge happens. */
export interface AggregateExplain {
  splitPipeline: { shardsPart: ValueObject[]; mergerPart: ValueObject[]; mergeSort?: ValueObject } | null;
  shardsPart: ValueObject[];
  targetedShards: string[];
  mergeType: 'router' | 'shard' | 'none';
}

/**
 * MongoDB's aggregate on a collection, as mongos runs it: the pipeline is split
 * (`splitPipeline`), each targeted shard runs its part as a cursor, and the router merges their
 * streams (merge-sorted when the split was at a `$sort`) and runs the rest. A pipeline with
 * nothing left to merge streams through a router cursor like a find; otherwise the router holds
 * the shards' results while it runs its part, then serves the answer as a cursor. Stages that
 * read another collection (`$lookup`, `$graphLookup`, `$unionWith`) run on the router, over that
 * collection read at the same concern (for an equality `$lookup`, only what can match).
 */
@Injectable()
export class AggregateService {
  constructor(
    private readonly cluster: ClusterRoutingService,
    private readonly sessions: RouterSessions,
    private readonly queries: QueryService,
    private readonly writes: WriteService,
    private readonly indexes: IndexesService,
    private readonly out: OutStage,
  ) {}

  /** MongoDB's aggregate; `owner`: the user opening its cursor, when the router checks callers. */
  async aggregate(ns: string, body: AggregateBody, owner?: string): Promise<CursorResponse | { explain: AggregateExplain; ok: 1 }> {
    const session = this.sessions.use(body);
    const stages = checkPipeline(body.pipeline.map((stage) => fromWire(stage)));
    await this.indexes.checkHint(ns, body.hint);
    const variables = body.let === undefined ? undefined : (fromWire(body.let) as ValueObject);
    const collation = collationOf(body);
    const read = await this.queries.readOf(body, session);
    return this.queries.readRetrying(ns, read.transaction, async () => {
      const routing = await this.cluster.routingForRead(ns);
      const planned = splitPipeline(stages);
      const shards = routing === undefined ? [] : routeFilter(targetingFilter(planned.filter, collation), routing, read.atClusterTime);
      const split = shards.length === 1 ? splitPipeline(stages, true) : planned;
      if (body.explain) return { explain: explainOf(split, shards), ok: 1 as const };
      const snapshot = read.atClusterTime === undefined ? {} : { atClusterTime: timestampToWire(read.atClusterTime) };
      const streaming = split.mergerPart.length === 0;
      const batchSize = body.cursor.batchSize ?? DEFAULT_BATCH_SIZE;
      const batches =
        routing === undefined
          ? []
          : await this.queries.openShardCursors(shards, (client, shard) =>
              client.aggregate({
                ns,
                ...routing.versioningFor(shard),
                ...(read.readConcern && { readConcern: read.readConcern }),
                ...this.queries.inTransaction(read.transaction, shard),
                filter: toWire(split.filter) as Record<string, unknown>,
                pipeline: split.shardsPart.map((stage) => toWire(stage) as Record<string, unknown>),
                ...(body.let !== undefined ? { let: body.let } : {}),
                batchSize: streaming ? batchSize : DRAIN_BATCH_SIZE,
                ...timeLimitField(read.limit),
                ...(body.collation !== undefined ? { collation: body.collation } : {}),
              }),
            );
      const merged = new RouterCursor(
        ns,
        batches,
        split.mergeSort === undefined ? {} : { compare: compileSort(split.mergeSort, collation) },
        this.queries.cursorPort(),
      );
      const cursor = streaming ? merged : await this.merge(ns, merged, split.mergerPart, { variables, read, collation });
      const { id, documents } = await this.queries.firstBatch(cursor, batchSize, session, owner);
      return { cursor: { id, ns, firstBatch: documents, ...snapshot }, ok: 1 as const };
    });
  }

  /**
   * Runs the router's part over every document the shards' cursors give, and answers a cursor
   * over the results; a final `$merge` or `$out` writes them instead, and the cursor is empty.
   */
  private async merge(ns: string, shards: RouterCursor, stages: ValueObject[], context: MergeContext): Promise<RouterCursor> {
    const last = stages.at(-1);
    const merging = last !== undefined && '$merge' in last ? parseMergeStage(last) : undefined;
    const out = last !== undefined && '$out' in last ? parseOutStage(last['$out'], ns) : undefined;
    const writing = merging !== undefined || out !== undefined;
    if (writing && context.read.transaction !== undefined)
      throw new TesseraError('OPERATION_NOT_SUPPORTED_IN_TRANSACTION', `${merging ? '$merge' : '$out'} cannot be used in a transaction`, {
        details: { field: 'pipeline' },
      });
    const input = await drain(shards);
    const running = writing ? stages.slice(0, -1) : stages;
    const results = await this.runStages(ns, input, running, context);
    if (merging !== undefined) await this.write(`${merging.db ?? databaseOf(ns)}.${merging.coll}`, merging, results);
    if (out !== undefined) await this.out.replace(out, results);
    const held: ShardBatch = { cursorId: null, documents: writing ? [] : results };
    return new RouterCursor(ns, [{ shard: 'router', batch: held }], {}, this.queries.cursorPort());
  }

  /**
   * `$merge`'s writes, in ordered batches through the router's write path, outside any session (as
   * MongoDB's, they are not the client's retryable writes); the first write error fails the
   * aggregate, and so does a result that matched nothing under `whenNotMatched: "fail"`.
   */
  private async write(targetNs: string, target: MergeTarget, results: ValueObject[]): Promise<void> {
    for (let start = 0; start < results.length; start += WRITE_BATCH_SIZE) {
      const statements = results.slice(start, start + WRITE_BATCH_SIZE).map((document) => mergeStatement(target, document));
      if (target.whenMatched === 'fail') {
        const documents = statements.map((s) => toWire((s as { insert: ValueObject }).insert) as Record<string, unknown>);
        const inserted = await this.writes.insert(targetNs, { documents, ordered: true });
        if (inserted.writeErrors[0] !== undefined) throw errorFromPublic(inserted.writeErrors[0]);
        continue;
      }
      const updates = statements.map((s) => {
        const { q, u, upsert, c } = s as Extract<MergeStatement, { q: ValueObject }>;
        return {
          q: toWire(q) as Record<string, unknown>,
          u: toWire(u as Value) as Record<string, unknown>,
          upsert,
          multi: false,
          // After a pipeline, an unmatched result is inserted as it is (MongoDB's upsertSupplied).
          ...(c !== undefined ? { c: toWire(c) as Record<string, unknown>, upsertSupplied: upsert } : {}),
        };
      });
      const answer = await this.writes.update(targetNs, { updates, ordered: true });
      if (answer.writeErrors[0] !== undefined) throw errorFromPublic(answer.writeErrors[0]);
      if (target.whenNotMatched === 'fail' && answer.matchedCount < updates.length)
        throw new TesseraError(
          'MERGE_STAGE_NO_MATCHING_DOCUMENT',
          '$merge could not find a matching document in the target collection for at least one document in the source collection',
          { details: { namespace: targetNs } },
        );
    }
  }

  /**
   * Runs the router's stages. A top-level `$lookup` by `localField`/`foreignField` reads only the
   * foreign documents its local values can match (an `$in` on `foreignField`, targeted as a find
   * is); any other stage reading a collection reads it whole.
   */
  private async runStages(ns: string, input: ValueObject[], stages: ValueObject[], context: MergeContext): Promise<ValueObject[]> {
    let documents = input;
    let start = 0;
    for (const [i, stage] of stages.entries()) {
      const join = equalityLookup(stage);
      if (join === undefined) continue;
      documents = await this.runReadingWhole(ns, documents, stages.slice(start, i), context);
      const values = localValues(documents, join.localField);
      const joined = await this.readCollection(
        `${databaseOf(ns)}.${join.from}`,
        context,
        values === undefined ? {} : { [join.foreignField]: { $in: values } },
      );
      documents = await this.runReadingWhole(ns, documents, [stage], context, new Map([[join.from, joined]]));
      start = i + 1;
    }
    return this.runReadingWhole(ns, documents, stages.slice(start), context);
  }

  /** Runs stages with every collection they read (but those `known`) read whole. */
  private async runReadingWhole(
    ns: string,
    documents: ValueObject[],
    stages: ValueObject[],
    context: MergeContext,
    known = new Map<string, ValueObject[]>(),
  ): Promise<ValueObject[]> {
    const collections = new Map(known);
    for (const name of collectionsRead(stages)) {
      if (!collections.has(name)) collections.set(name, await this.readCollection(`${databaseOf(ns)}.${name}`, context));
    }
    return runPipeline(documents, stages, {
      ...(context.variables !== undefined ? { variables: context.variables } : {}),
      collation: context.collation,
      collection: (name) => collections.get(name) ?? [],
    });
  }

  /** The documents of a collection matching `filter`, read at the aggregate's concern (in its transaction, if any). */
  private async readCollection(ns: string, { read }: MergeContext, filter: ValueObject = {}): Promise<ValueObject[]> {
    const routing = await this.cluster.routingForRead(ns);
    if (routing === undefined) return [];
    const shards = routeFilter(filter, routing, read.atClusterTime);
    const batches = await this.queries.openShardCursors(shards, (client, shard) =>
      client.find({
        ns,
        ...routing.versioningFor(shard),
        ...(read.readConcern && { readConcern: read.readConcern }),
        ...this.queries.inTransaction(read.transaction, shard),
        filter: toWire(filter) as Record<string, unknown>,
        batchSize: DRAIN_BATCH_SIZE,
        ...timeLimitField(read.limit),
      }),
    );
    return drain(new RouterCursor(ns, batches, {}, this.queries.cursorPort()));
  }
}

/** Every document a router cursor has left, read in large batches. */
async function drain(cursor: RouterCursor): Promise<ValueObject[]> {
  const documents: ValueObject[] = [];
  while (!cursor.isExhausted) documents.push(...(await cursor.nextBatch(DRAIN_BATCH_SIZE)));
  return documents;
}

interface MergeContext {
  variables: ValueObject | undefined;
  collation?: Collation | undefined;
  read: Awaited<ReturnType<QueryService['readOf']>>;
}

function explainOf(split: SplitPipeline, shards: string[]): AggregateExplain {
  const matchStage = Object.keys(split.filter).length === 0 ? [] : [{ $match: split.filter }];
  const shardsPart = [...matchStage, ...split.shardsPart].map((stage) => toWire(stage) as ValueObject);
  const mergerPart = split.mergerPart.map((stage) => toWire(stage) as ValueObject);
  const merging = mergerPart.length > 0 || split.mergeSort !== undefined || shards.length > 1;
  return {
    splitPipeline: shards.length > 1 ? { shardsPart, mergerPart, ...(split.mergeSort ? { mergeSort: split.mergeSort } : {}) } : null,
    shardsPart,
    targetedShards: shards,
    mergeType: shards.length === 0 ? 'none' : merging ? 'router' : 'shard',
  };
}

/** Local values past which a join reads its foreign collection whole rather than by an `$in`. */
const MAX_JOIN_VALUES = 50_000;

/** A `$lookup` matching `localField` to `foreignField`, with or without a pipeline; undefined for any other stage. */
function equalityLookup(stage: ValueObject): { from: string; localField: string; foreignField: string } | undefined {
  const spec = stage['$lookup'];
  if (!isDocument(spec)) return undefined;
  const { from, localField, foreignField } = spec;
  return typeof from === 'string' && typeof localField === 'string' && typeof foreignField === 'string'
    ? { from, localField, foreignField }
    : undefined;
}

/**
 * The values a join's `localField` holds across `documents`, as `$lookup` matches them: through
 * arrays element by element, a missing field as null. Undefined (read the collection whole) when
 * one is a regex, which an `$in` would match as a pattern, or when there are too many.
 */
function localValues(documents: readonly ValueObject[], path: string): Value[] | undefined {
  const values: Value[] = [];
  const walk = (value: Value | undefined, segments: readonly string[]): void => {
    if (segments.length === 0) {
      if (Array.isArray(value)) values.push(...(value as Value[]));
      else values.push(value === undefined ? null : value);
      return;
    }
    if (Array.isArray(value)) {
      for (const element of value as Value[]) walk(element, segments);
      return;
    }
    walk(isDocument(value) ? value[segments[0]!] : undefined, segments.slice(1));
  };
  for (const document of documents) walk(document, path.split('.'));
  if (values.some((value) => value instanceof RegExp || (value as { _bsontype?: string } | null)?._bsontype === 'BSONRegExp'))
    return undefined;
  const distinct = distinctValues(values);
  return distinct.length > MAX_JOIN_VALUES ? undefined : distinct;
}
