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
  chunkVersionToString,
  compareChunkVersions,
  compareShardKeys,
  encodeKey,
  isSameGeneration,
  toExtendedJson,
} from '@tessera/core';
import { type CommitResult, chunkRangeToWire, chunkToWire, shardKeyToWire } from '@tessera/protocol';
import type { SizeEstimate } from './chunk-catalog.store.js';

/**
 * The checks a metadata commit makes before it writes, as pure functions of the request and the
 * chunks read under the collection lock. Each failure is a `TesseraError` whose message says
 * what was wrong and where, with `details.problem` naming the rule and `details.ns` the
 * collection, so callers branch on data, never on text.
 */

/** The compare-and-set of every commit. Throws `STALE_EPOCH` across generations, `CONFLICTING_OPERATION` (retryable) otherwise. */
export function checkExpectedVersion(ns: string, expected: ChunkVersion, current: ChunkVersion): void {
  const relation = compareChunkVersions(expected, current);
  if (relation === 'same') return;
  const details = { ns, problem: relation === 'differentGeneration' ? 'staleEpoch' : 'staleVersion', expected, current };
  if (relation === 'differentGeneration') {
    throw new TesseraError(
      'STALE_EPOCH',
      `The request for ${ns} expected collection version ${chunkVersionToString(expected)}, but the collection is now another generation (${chunkVersionToString(current)}); refresh fully.`,
      { details },
    );
  }
  throw new TesseraError(
    'CONFLICTING_OPERATION',
    `The request for ${ns} expected collection version ${chunkVersionToString(expected)}, but it is ${chunkVersionToString(current)}: another commit won; re-read and retry.`,
    { details },
  );
}

/** Checks that a key has the pattern's arity and encodable values. Throws `BAD_VALUE` naming `where`. */
export function checkKey(ns: string, pattern: ShardKeyPattern, key: ShardKey, where: string): void {
  if (key.length !== pattern.fields.length) {
    throw new TesseraError('BAD_VALUE', `${where} of ${ns} has ${key.length} field(s); the shard key has ${pattern.fields.length}.`, {
      details: { ns, problem: 'arity', field: where, expected: pattern.fields.length, got: key.length },
    });
  }
  try {
    encodeKey(key);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new TesseraError('BAD_VALUE', `${where} of ${ns} holds a value that cannot be a shard key: ${reason}`, {
      details: { ns, problem: 'value', field: where },
    });
  }
}

/** Checks a range's bounds (arity, min < max). Throws `BAD_VALUE`. */
export function checkRange(ns: string, pattern: ShardKeyPattern, range: ChunkRange): void {
  checkKey(ns, pattern, range.min, 'range.min');
  checkKey(ns, pattern, range.max, 'range.max');
  if (compareShardKeys(range.min, range.max) >= 0) {
    throw new TesseraError('BAD_VALUE', `range ${chunkRangeToString(range)} of ${ns} is empty or inverted.`, {
      details: { ns, problem: 'emptyRange', range: chunkRangeToWire(range) },
    });
  }
}

/**
 * Checks that `range` is exactly `chunk` (the chunk holding `range.min`) and, when `shard` is
 * given, that the chunk is on it. Returns the chunk. Throws `BAD_VALUE` with problem
 * `notAChunk` or `wrongShard`, naming the chunk actually there.
 */
export function checkIsChunk(ns: string, range: ChunkRange, chunk: Chunk | undefined, shard?: string): Chunk {
  if (chunk === undefined || compareShardKeys(chunk.range.min, range.min) !== 0 || compareShardKeys(chunk.range.max, range.max) !== 0) {
    const there =
      chunk === undefined ? 'no chunk holds its min' : `the chunk holding its min is ${chunkRangeToString(chunk.range)} on ${chunk.shard}`;
    throw new TesseraError('BAD_VALUE', `${chunkRangeToString(range)} is not a chunk of ${ns}: ${there}.`, {
      details: { ns, problem: 'notAChunk', range: chunkRangeToWire(range), ...(chunk ? { chunk: describeChunk(chunk) } : {}) },
    });
  }
  if (shard !== undefined && chunk.shard !== shard) {
    throw new TesseraError('BAD_VALUE', `Chunk ${chunkRangeToString(range)} of ${ns} is on ${chunk.shard}, not on ${shard}.`, {
      details: { ns, problem: 'wrongShard', range: chunkRangeToWire(range), expectedShard: shard, shard: chunk.shard },
    });
  }
  return chunk;
}

/**
 * Checks split points against the chunk: each strictly inside it (not equal to a bound) and
 * strictly above the previous one. Throws `BAD_VALUE` naming the point (`splitPoints[i]`) with
 * problem `outsideChunk`, `equalsBound` or `notIncreasing`.
 */
export function checkSplitPoints(ns: string, chunk: Chunk, points: readonly ShardKey[]): void {
  const where = `chunk ${chunkRangeToString(chunk.range)} of ${ns}`;
  points.forEach((point, i) => {
    const field = `splitPoints[${i}]`;
    const shown = point.map((v) => toExtendedJson(v)).join(', ');
    const fail = (problem: string, message: string): never => {
      throw new TesseraError('BAD_VALUE', `${field} (${shown}) ${message}.`, {
        details: { ns, problem, field, point: shardKeyToWire(point), range: chunkRangeToWire(chunk.range) },
      });
    };
    const vsMin = compareShardKeys(point, chunk.range.min);
    const vsMax = compareShardKeys(point, chunk.range.max);
    if (vsMin === 0) fail('equalsBound', `equals the min bound of ${where}`);
    if (vsMax === 0) fail('equalsBound', `equals the max bound of ${where}`);
    if (vsMin < 0 || vsMax > 0) fail('outsideChunk', `is outside ${where}`);
    const previous = points[i - 1];
    if (previous !== undefined && compareShardKeys(previous, point) >= 0) fail('notIncreasing', `is not above splitPoints[${i - 1}]`);
  });
}

/**
 * Checks that `chunks` (in key order, from the chunk holding `range.min` to the last chunk
 * starting below `range.max`) cover `range` exactly, are contiguous, all on `shard`, and are at
 * least two. Throws `BAD_VALUE` naming the chunk that breaks the run, with problem
 * `minNotABound`, `maxNotABound`, `gap`, `otherShard` or `singleChunk`.
 */
export function checkMergeRun(ns: string, range: ChunkRange, shard: string, chunks: readonly Chunk[]): void {
  const fail = (problem: string, message: string, chunk?: Chunk): never => {
    throw new TesseraError('BAD_VALUE', `Cannot merge ${chunkRangeToString(range)} of ${ns}: ${message}.`, {
      details: { ns, problem, range: chunkRangeToWire(range), shard, ...(chunk ? { chunk: describeChunk(chunk) } : {}) },
    });
  };
  const first = chunks[0];
  if (first === undefined || compareShardKeys(first.range.min, range.min) !== 0) {
    return fail(
      'minNotABound',
      first ? `its min is inside chunk ${chunkRangeToString(first.range)}, not a chunk bound` : 'no chunk holds its min',
      first,
    );
  }
  chunks.forEach((chunk, i) => {
    const previous = chunks[i - 1];
    if (previous !== undefined && compareShardKeys(previous.range.max, chunk.range.min) !== 0) {
      fail('gap', `chunks ${chunkRangeToString(previous.range)} and ${chunkRangeToString(chunk.range)} are not contiguous`, chunk);
    }
    if (chunk.shard !== shard) fail('otherShard', `chunk ${chunkRangeToString(chunk.range)} is on ${chunk.shard}, not on ${shard}`, chunk);
  });
  const last = chunks[chunks.length - 1] as Chunk;
  const end = compareShardKeys(last.range.max, range.max);
  if (end > 0) fail('maxNotABound', `its max is inside chunk ${chunkRangeToString(last.range)}, not a chunk bound`, last);
  if (end < 0) fail('gap', `no chunk follows ${chunkRangeToString(last.range)} up to the range's max`, last);
  if (chunks.length < 2) fail('singleChunk', 'it is a single chunk; a merge needs two or more', first);
}

/** A chunk as JSON, for error details and the changelog. */
export interface DescribedChunk {
  range: ReturnType<typeof chunkRangeToWire>;
  shard: string;
  version: string;
  /** The chunk's size estimate in the catalog when the commit wrote the row; absent when it has none. */
  estimatedSizeBytes?: number;
  estimatedDocuments?: number;
}

/** A chunk's range, shard and version as JSON, with its size estimate when the caller knows one. */
export function describeChunk(chunk: Chunk, estimate?: SizeEstimate): DescribedChunk {
  return {
    range: chunkRangeToWire(chunk.range),
    shard: chunk.shard,
    version: `${chunk.version.major}|${chunk.version.minor}`,
    ...(estimate === undefined ? {} : { estimatedSizeBytes: estimate.bytes }),
    ...(estimate?.documents == null ? {} : { estimatedDocuments: estimate.documents }),
  };
}

/** Throws `STALE_EPOCH` unless the request names the collection's current generation. */
export function checkGeneration(ns: string, expected: CollectionGeneration, current: CollectionGeneration): void {
  if (isSameGeneration(expected, current)) return;
  throw new TesseraError(
    'STALE_EPOCH',
    `The request for ${ns} names generation ${expected.epoch}, but the collection is now ${current.epoch}; refresh fully.`,
    {
      details: { ns, problem: 'staleEpoch', expected, current },
    },
  );
}

/** A commit's answer: the written chunks and the collection version after it (the highest of `cv` and theirs). */
export function commitResult(ns: string, cv: ChunkVersion, written: readonly Chunk[], configTime: ClusterTimestamp): CommitResult {
  let collectionVersion = cv;
  for (const chunk of written) {
    const v = chunk.version;
    if (v.major > collectionVersion.major || (v.major === collectionVersion.major && v.minor > collectionVersion.minor))
      collectionVersion = v;
  }
  return { ns, chunks: written.map(chunkToWire), collectionVersion, configTime };
}

export function sortByMin(chunks: Chunk[]): Chunk[] {
  return chunks.sort((a, b) => Buffer.compare(Buffer.from(encodeKey(a.range.min)), Buffer.from(encodeKey(b.range.min))));
}
