/**
 * The version bump rules, one function per row of the reference's table ("Types of operations
 * that will cause the versioning information to become stale"). `cv` is the collection version
 * Mcv|mcv before the operation; every new version keeps the collection's generation except
 * where the row says otherwise.
 */
import { TesseraError } from '../errors.js';
import { DROPPED_VERSION } from './chunk-version.js';
import type { ChunkVersion, CollectionGeneration, CollectionVersion, ShardVersion } from './chunk-version.js';

/** The new versions of a migration: the moved chunk's, and the donor's control chunk's if it has one. */
export interface MoveVersions {
  readonly moved: ChunkVersion;
  readonly control: ChunkVersion | undefined;
}

/**
 * Row "Moving a chunk C": C becomes <Mcv + 1, 0, Ecv>; the control chunk (another chunk the
 * donor keeps), if any, becomes <Mcv + 1, 1, Ecv>, so the donor's shard version moves too.
 * Without one the donor's shard version falls to <0, 0, Ecv>. Throws nothing.
 */
export function bumpVersionsOnMove(cv: CollectionVersion, hasControlChunk: boolean): MoveVersions {
  const major = cv.major + 1;
  return {
    moved: { epoch: cv.epoch, timestamp: cv.timestamp, major, minor: 0 },
    control: hasControlChunk ? { epoch: cv.epoch, timestamp: cv.timestamp, major, minor: 1 } : undefined,
  };
}

/**
 * Row "Splitting a chunk C into n pieces": piece k (1-based, in key order) becomes
 * <Mcv, mcv + k, Ecv>. Returns n versions. Throws `BAD_VALUE` unless n is an integer >= 2.
 */
export function bumpVersionsOnSplit(cv: CollectionVersion, pieces: number): ChunkVersion[] {
  if (!Number.isSafeInteger(pieces) || pieces < 2) {
    throw new TesseraError('BAD_VALUE', `A split makes at least 2 pieces, got ${pieces}.`, { details: { pieces } });
  }
  return Array.from({ length: pieces }, (_, k) => ({ epoch: cv.epoch, timestamp: cv.timestamp, major: cv.major, minor: cv.minor + k + 1 }));
}

/**
 * Row "Merging chunks C1, ..., Cn": the merged chunk becomes <Mcv, mcv + 1, Ecv> whatever the
 * versions of C1..Cn were. Throws `BAD_VALUE` unless n is an integer >= 2.
 */
export function bumpVersionOnMerge(cv: CollectionVersion, merged: number): ChunkVersion {
  if (!Number.isSafeInteger(merged) || merged < 2) {
    throw new TesseraError('BAD_VALUE', `A merge joins at least 2 chunks, got ${merged}.`, { details: { merged } });
  }
  return { epoch: cv.epoch, timestamp: cv.timestamp, major: cv.major, minor: cv.minor + 1 };
}

/**
 * Row "Dropping a collection": every shard's version becomes SVi<0, 0, ObjectId()>, the
 * dropped convention (`DROPPED_VERSION`). Returns one entry per shard id. Throws nothing.
 */
export function shardVersionsOnDrop(shardIds: readonly string[]): Map<string, ShardVersion> {
  return new Map(shardIds.map((id) => [id, DROPPED_VERSION]));
}

/**
 * Row "Refining a collection's shard key": every chunk keeps Mi|mi and takes the new epoch
 * Enew (and the new generation's timestamp). Returns the new versions in input order. Throws
 * `BAD_VALUE` when the new generation's epoch equals the old one.
 */
export function bumpVersionsOnRefine(versions: readonly ChunkVersion[], newGeneration: CollectionGeneration): ChunkVersion[] {
  return versions.map((v) => {
    if (v.epoch === newGeneration.epoch) {
      throw new TesseraError('BAD_VALUE', 'Refining a shard key needs a new epoch.', { details: { epoch: v.epoch } });
    }
    return { epoch: newGeneration.epoch, timestamp: newGeneration.timestamp, major: v.major, minor: v.minor };
  });
}
