/**
 * Chunk versions (reference: sharding-internals.md, "Shard versioning"). A chunk version is
 * (epoch, timestamp, major, minor): the epoch and timestamp name one generation (incarnation)
 * of a sharded collection; major counts migrations, minor splits and merges. The collection
 * version is the highest chunk version of the collection; a shard version the highest chunk
 * version on one shard. Versions are plain immutable data; functions operate on them.
 */
import { TesseraError } from '../errors.js';
import { clusterTimestampsEqual, clusterTimestampToString, ZERO_CLUSTER_TIMESTAMP } from './cluster-timestamp.js';
import type { ClusterTimestamp } from './cluster-timestamp.js';

/** The identity of one incarnation of a sharded collection: dropping or refining changes it. */
export interface CollectionGeneration {
  /** An ObjectId as 24 hex digits. */
  readonly epoch: string;
  /** The cluster time at which this generation was created. */
  readonly timestamp: ClusterTimestamp;
}

/** The version of one chunk: generation plus `major|minor`. */
export interface ChunkVersion extends CollectionGeneration {
  readonly major: number;
  readonly minor: number;
}

/** The highest chunk version on one shard (0|0 of the generation when it owns no chunk). */
export type ShardVersion = ChunkVersion;

/** The highest chunk version of a collection. */
export type CollectionVersion = ChunkVersion;

/** How one version relates to another. */
export type VersionComparison = 'same' | 'older' | 'newer' | 'differentGeneration';

/** The zero ObjectId, MongoDB's `OID()`: the epoch of the unsharded and dropped conventions. */
export const ZERO_EPOCH = '000000000000000000000000';

/**
 * The epoch of the "ignore the chunk version" convention: an ObjectId at the maximum date
 * (every byte 0xFF), which no generated epoch can equal.
 */
export const IGNORED_EPOCH = 'ffffffffffffffffffffffff';

/** Convention: the chunk version of an unsharded collection, 0|0 with the zero epoch. */
export const UNSHARDED_VERSION: ChunkVersion = Object.freeze({ epoch: ZERO_EPOCH, timestamp: ZERO_CLUSTER_TIMESTAMP, major: 0, minor: 0 });

/** Convention: the shard version of a dropped collection, 0|0 with the zero epoch (as unsharded). */
export const DROPPED_VERSION: ChunkVersion = UNSHARDED_VERSION;

/** Convention: a request carrying this version skips the shard version check, 0|0 with `IGNORED_EPOCH`. */
export const IGNORED_VERSION: ChunkVersion = Object.freeze({ epoch: IGNORED_EPOCH, timestamp: ZERO_CLUSTER_TIMESTAMP, major: 0, minor: 0 });

/** Convention: the major|minor of the first chunk of a newly sharded collection, 1|0. */
export const FIRST_CHUNK_MAJOR_MINOR = Object.freeze({ major: 1, minor: 0 });

/**
 * Builds a chunk version. Throws `BAD_VALUE` unless the epoch is 24 hex digits and major and
 * minor are non-negative safe integers.
 */
export function makeChunkVersion(generation: CollectionGeneration, major: number, minor: number): ChunkVersion {
  if (!/^[0-9a-f]{24}$/.test(generation.epoch)) {
    throw new TesseraError('BAD_VALUE', `A chunk version epoch must be an ObjectId in hex, got "${generation.epoch}".`, {
      details: { epoch: generation.epoch },
    });
  }
  if (!Number.isSafeInteger(major) || major < 0 || !Number.isSafeInteger(minor) || minor < 0) {
    throw new TesseraError('BAD_VALUE', `A chunk version needs non-negative integers, got ${major}|${minor}.`, {
      details: { major, minor },
    });
  }
  return { epoch: generation.epoch, timestamp: { t: generation.timestamp.t, i: generation.timestamp.i }, major, minor };
}

/** Returns the version 1|0 of the first chunk of a newly sharded collection of `generation`. Throws as `makeChunkVersion`. */
export function firstChunkVersion(generation: CollectionGeneration): ChunkVersion {
  return makeChunkVersion(generation, FIRST_CHUNK_MAJOR_MINOR.major, FIRST_CHUNK_MAJOR_MINOR.minor);
}

/** Returns the version 0|0 of `generation`: the shard version of a shard that owns no chunk of it. Throws nothing. */
export function zeroVersionOf(generation: CollectionGeneration): ChunkVersion {
  return { epoch: generation.epoch, timestamp: generation.timestamp, major: 0, minor: 0 };
}

/** Returns the generation part of a version. Throws nothing. */
export function generationOf(version: CollectionGeneration): CollectionGeneration {
  return { epoch: version.epoch, timestamp: version.timestamp };
}

/** True when both belong to the same generation (same epoch and timestamp). Throws nothing. */
export function isSameGeneration(a: CollectionGeneration, b: CollectionGeneration): boolean {
  return a.epoch === b.epoch && clusterTimestampsEqual(a.timestamp, b.timestamp);
}

/**
 * Tells how `a` relates to `b`: `'same'`, `'older'` or `'newer'` within one generation (by
 * major, then minor), or `'differentGeneration'` when epochs or timestamps differ (no order
 * exists across generations: the holder must refresh fully). Throws nothing.
 */
export function compareChunkVersions(a: ChunkVersion, b: ChunkVersion): VersionComparison {
  if (!isSameGeneration(a, b)) return 'differentGeneration';
  if (a.major !== b.major) return a.major < b.major ? 'older' : 'newer';
  if (a.minor !== b.minor) return a.minor < b.minor ? 'older' : 'newer';
  return 'same';
}

/**
 * Orders two versions of one generation by major, then minor: -1, 0 or 1.
 * Throws `STALE_EPOCH` when they are of different generations.
 */
export function orderChunkVersions(a: ChunkVersion, b: ChunkVersion): -1 | 0 | 1 {
  switch (compareChunkVersions(a, b)) {
    case 'same':
      return 0;
    case 'older':
      return -1;
    case 'newer':
      return 1;
    case 'differentGeneration':
      throw new TesseraError(
        'STALE_EPOCH',
        `Versions ${chunkVersionToString(a)} and ${chunkVersionToString(b)} belong to different generations.`,
        {
          details: { a, b },
        },
      );
  }
}

/** Returns the higher of two versions of one generation. Throws `STALE_EPOCH` across generations. */
export function maxChunkVersion(a: ChunkVersion, b: ChunkVersion): ChunkVersion {
  return orderChunkVersions(a, b) >= 0 ? a : b;
}

/** True when `version` is the "ignore the chunk version" convention. Throws nothing. */
export function isIgnoredVersion(version: ChunkVersion): boolean {
  return version.epoch === IGNORED_EPOCH && version.major === 0 && version.minor === 0;
}

/** True when `version` is the unsharded (or dropped) convention 0|0 with the zero epoch. Throws nothing. */
export function isUnshardedVersion(version: ChunkVersion): boolean {
  return version.epoch === ZERO_EPOCH && version.major === 0 && version.minor === 0;
}

/** Returns the display form `"major|minor||epoch||t,i"`. Throws nothing. */
export function chunkVersionToString(version: ChunkVersion): string {
  return `${version.major}|${version.minor}||${version.epoch}||${clusterTimestampToString(version.timestamp)}`;
}

/**
 * True when a request versioned `received` may run on a shard holding `wanted` (MongoDB's
 * isWriteCompatibleWith): same generation and same major version. Only a migration changes
 * which shard owns a key, and it bumps the major version of both shards; splits and merges bump
 * the minor only and leave ownership as it was, so a router that missed them still targets
 * right and need not be sent back to refresh. Throws nothing.
 */
export function isPlacementCompatible(received: ChunkVersion, wanted: ChunkVersion): boolean {
  return isSameGeneration(received, wanted) && received.major === wanted.major;
}

/**
 * Checks the shard version a request carries against the version the shard holds, as a shard
 * does on every versioned request. Passes when they are placement-compatible
 * (`isPlacementCompatible`) or the request carries `IGNORED_VERSION`. Throws `STALE_CONFIG`
 * (retryable) with both versions in `details` (`received`, `wanted`, `namespace`) otherwise;
 * the side that is behind refreshes.
 */
export function checkShardVersion(namespace: string, received: ShardVersion, wanted: ShardVersion): void {
  if (isIgnoredVersion(received) || isPlacementCompatible(received, wanted)) return;
  const relation = compareChunkVersions(received, wanted);
  throw new TesseraError(
    'STALE_CONFIG',
    `Shard version mismatch for ${namespace}: request has ${chunkVersionToString(received)}, shard has ${chunkVersionToString(wanted)} (${relation}).`,
    { details: { namespace, received, wanted, relation } },
  );
}
