/**
 * Table-driven tests for every row of the reference's version table and conventions tables
 * (sharding-internals.md, "Types of operations that will cause the versioning information to
 * become stale" and "Special versioning conventions"). Each case quotes its row.
 */
import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import type { ChunkVersion, CollectionGeneration } from './chunk-version.js';
import {
  compareChunkVersions,
  DROPPED_VERSION,
  firstChunkVersion,
  IGNORED_EPOCH,
  IGNORED_VERSION,
  isIgnoredVersion,
  isUnshardedVersion,
  UNSHARDED_VERSION,
  ZERO_EPOCH,
} from './chunk-version.js';
import {
  bumpDatabaseVersionOnMovePrimary,
  databaseVersionAfterDrop,
  FIXED_DATABASE_LAST_MOD,
  fixedDatabaseVersion,
  NEW_DATABASE_LAST_MOD,
  newDatabaseVersion,
} from './database-version.js';
import { bumpVersionOnMerge, bumpVersionsOnMove, bumpVersionsOnRefine, bumpVersionsOnSplit, shardVersionsOnDrop } from './version-bumps.js';

const GEN: CollectionGeneration = { epoch: '65a000000000000000000001', timestamp: { t: 100, i: 1 } };
const NEW_GEN: CollectionGeneration = { epoch: '65a000000000000000000002', timestamp: { t: 200, i: 1 } };

/** Builds a version of GEN (or another generation) from "M|m". */
function v(majorMinor: string, generation: CollectionGeneration = GEN): ChunkVersion {
  const [major, minor] = majorMinor.split('|').map(Number);
  return { ...generation, major: major ?? 0, minor: minor ?? 0 };
}

const majorMinor = (x: ChunkVersion | undefined) => (x === undefined ? undefined : `${x.major}|${x.minor}`);

describe('the version table', () => {
  const cv = v('7|3');

  it.each([
    { hasControl: true, moved: '8|0', control: '8|1' },
    { hasControl: false, moved: '8|0', control: undefined },
  ])(
    'row "Moving a chunk C": C<Mcv + 1, 0, Ecv>, ControlChunk<Mcv + 1, 1, Ecv> if any (control chunk: $hasControl)',
    ({ hasControl, moved, control }) => {
      const result = bumpVersionsOnMove(cv, hasControl);
      expect(majorMinor(result.moved)).toBe(moved);
      expect(majorMinor(result.control)).toBe(control);
      expect(result.moved.epoch).toBe(cv.epoch);
    },
  );

  it.each([
    { n: 2, pieces: ['7|4', '7|5'] },
    { n: 3, pieces: ['7|4', '7|5', '7|6'] },
    { n: 5, pieces: ['7|4', '7|5', '7|6', '7|7', '7|8'] },
  ])('row "Splitting a chunk C into n pieces": Cnew k<Mcv, mcv + k, Ecv> (n = $n)', ({ n, pieces }) => {
    const result = bumpVersionsOnSplit(cv, n);
    expect(result.map(majorMinor)).toEqual(pieces);
    expect(result.every((p) => p.epoch === cv.epoch)).toBe(true);
  });

  it.each([2, 3, 10])('row "Merging chunks C1, ..., Cn": Cnew<Mcv, mcv + 1, Ecv> (n = %i)', (n) => {
    expect(majorMinor(bumpVersionOnMerge(cv, n))).toBe('7|4');
  });

  it('row "Dropping a collection": SVi<0, 0, objectid()> forall i', () => {
    const versions = shardVersionsOnDrop(['shardA', 'shardB', 'shardC']);
    expect([...versions.keys()]).toEqual(['shardA', 'shardB', 'shardC']);
    for (const version of versions.values()) expect(version).toEqual({ epoch: ZERO_EPOCH, timestamp: { t: 0, i: 0 }, major: 0, minor: 0 });
  });

  it('row "Refining a collection\'s shard key": Ci<Mi, mi, Enew> forall i', () => {
    const before = [v('1|0'), v('3|2'), v('7|3')];
    const after = bumpVersionsOnRefine(before, NEW_GEN);
    expect(after.map(majorMinor)).toEqual(['1|0', '3|2', '7|3']);
    expect(after.every((x) => x.epoch === NEW_GEN.epoch)).toBe(true);
    expect(compareChunkVersions(after[2] as ChunkVersion, before[2] as ChunkVersion)).toBe('differentGeneration');
  });

  it('row "Changing the primary shard for a DB": DBV<uuid, lastMod + 1>', () => {
    expect(bumpDatabaseVersionOnMovePrimary({ uuid: 'u1', lastMod: 4 })).toEqual({ uuid: 'u1', lastMod: 5 });
  });

  it('row "Dropping a database": the dropped DB doesn\'t have a DBV', () => {
    expect(databaseVersionAfterDrop({ uuid: 'u1', lastMod: 4 })).toBeUndefined();
  });

  it('refuses a split into fewer than 2 pieces and a merge of fewer than 2 chunks', () => {
    expect(() => bumpVersionsOnSplit(cv, 1)).toThrow(TesseraError);
    expect(() => bumpVersionOnMerge(cv, 1)).toThrow(TesseraError);
  });
});

describe('the chunk version conventions table', () => {
  it.each([
    {
      row: 'First chunk for sharded collection | 1 | 0 | ObjectId()',
      version: firstChunkVersion(GEN),
      major: 1,
      minor: 0,
      epoch: GEN.epoch,
    },
    { row: 'Collection is unsharded | 0 | 0 | ObjectId()', version: UNSHARDED_VERSION, major: 0, minor: 0, epoch: ZERO_EPOCH },
    { row: 'Collection was dropped | 0 | 0 | ObjectId()', version: DROPPED_VERSION, major: 0, minor: 0, epoch: ZERO_EPOCH },
    {
      row: 'Ignore the chunk version for this request | 0 | 0 | Max DateTime',
      version: IGNORED_VERSION,
      major: 0,
      minor: 0,
      epoch: IGNORED_EPOCH,
    },
  ])('row "$row"', ({ version, major, minor, epoch }) => {
    expect(version.major).toBe(major);
    expect(version.minor).toBe(minor);
    expect(version.epoch).toBe(epoch);
  });

  it('recognises the ignored and unsharded conventions and nothing else', () => {
    expect(isIgnoredVersion(IGNORED_VERSION)).toBe(true);
    expect(isIgnoredVersion(UNSHARDED_VERSION)).toBe(false);
    expect(isUnshardedVersion(UNSHARDED_VERSION)).toBe(true);
    expect(isUnshardedVersion(v('0|0'))).toBe(false);
  });
});

describe('the database version conventions table', () => {
  it.each([
    { row: 'New database | UUID() | 1', version: newDatabaseVersion('uuid-new'), lastMod: NEW_DATABASE_LAST_MOD, expected: 1 },
    { row: 'Config database | UUID() | 0', version: fixedDatabaseVersion('uuid-config'), lastMod: FIXED_DATABASE_LAST_MOD, expected: 0 },
    { row: 'Admin database | UUID() | 0', version: fixedDatabaseVersion('uuid-admin'), lastMod: FIXED_DATABASE_LAST_MOD, expected: 0 },
  ])('row "$row"', ({ version, lastMod, expected }) => {
    expect(version.lastMod).toBe(expected);
    expect(lastMod).toBe(expected);
  });
});
