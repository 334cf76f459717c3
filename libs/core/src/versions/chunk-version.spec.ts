import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import type { ChunkVersion } from './chunk-version.js';
import {
  checkShardVersion,
  chunkVersionToString,
  compareChunkVersions,
  IGNORED_VERSION,
  makeChunkVersion,
  maxChunkVersion,
  orderChunkVersions,
} from './chunk-version.js';
import { checkDatabaseVersion, compareDatabaseVersions } from './database-version.js';
import { compareClusterTimestamps, makeClusterTimestamp } from './cluster-timestamp.js';

const GEN = { epoch: '65a000000000000000000001', timestamp: { t: 100, i: 1 } };
const v = (major: number, minor: number, gen = GEN): ChunkVersion => ({ ...gen, major, minor });

describe('compareChunkVersions', () => {
  it.each([
    { a: v(2, 3), b: v(2, 3), expected: 'same' },
    { a: v(2, 3), b: v(2, 4), expected: 'older' },
    { a: v(2, 9), b: v(3, 0), expected: 'older' },
    { a: v(3, 0), b: v(2, 9), expected: 'newer' },
    { a: v(2, 3), b: v(2, 3, { ...GEN, epoch: '65a000000000000000000002' }), expected: 'differentGeneration' },
    { a: v(2, 3), b: v(2, 3, { ...GEN, timestamp: { t: 100, i: 2 } }), expected: 'differentGeneration' },
  ])('says $expected for $a.major|$a.minor against $b.major|$b.minor', ({ a, b, expected }) => {
    expect(compareChunkVersions(a, b)).toBe(expected);
  });

  it('orders within a generation and refuses to order across generations with STALE_EPOCH', () => {
    expect(orderChunkVersions(v(1, 2), v(1, 1))).toBe(1);
    expect(maxChunkVersion(v(1, 2), v(3, 0))).toEqual(v(3, 0));
    expect(() => orderChunkVersions(v(1, 0), v(1, 0, { ...GEN, epoch: '65a000000000000000000009' }))).toThrow(
      expect.objectContaining({ code: 'STALE_EPOCH' }),
    );
  });

  it('prints versions as major|minor||epoch||t,i', () => {
    expect(chunkVersionToString(v(4, 2))).toBe('4|2||65a000000000000000000001||100,1');
  });

  it('rejects a malformed epoch or a negative major with BAD_VALUE', () => {
    expect(() => makeChunkVersion({ ...GEN, epoch: 'xyz' }, 1, 0)).toThrow(TesseraError);
    expect(() => makeChunkVersion(GEN, -1, 0)).toThrow(TesseraError);
  });
});

describe('checkShardVersion', () => {
  it('passes on the same version and on the ignored version', () => {
    expect(() => checkShardVersion('db.c', v(2, 1), v(2, 1))).not.toThrow();
    expect(() => checkShardVersion('db.c', IGNORED_VERSION, v(2, 1))).not.toThrow();
  });

  it('passes across splits and merges (minor versions), not across a migration (major) or a new generation', () => {
    expect(() => checkShardVersion('db.c', v(2, 1), v(2, 7))).not.toThrow();
    expect(() => checkShardVersion('db.c', v(2, 7), v(2, 1))).not.toThrow();
    expect(() => checkShardVersion('db.c', v(2, 7), v(3, 0))).toThrow(expect.objectContaining({ code: 'STALE_CONFIG' }));
    expect(() => checkShardVersion('db.c', v(3, 0), v(2, 7))).toThrow(expect.objectContaining({ code: 'STALE_CONFIG' }));
    const otherGeneration = makeChunkVersion({ ...GEN, epoch: '65a000000000000000000002' }, 2, 1);
    expect(() => checkShardVersion('db.c', otherGeneration, v(2, 1))).toThrow(expect.objectContaining({ code: 'STALE_CONFIG' }));
  });

  it('answers a retryable STALE_CONFIG carrying both versions on a mismatch', () => {
    try {
      checkShardVersion('db.c', v(2, 1), v(3, 0));
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(TesseraError);
      const e = error as TesseraError;
      expect(e.code).toBe('STALE_CONFIG');
      expect(e.retryable).toBe(true);
      expect(e.details).toMatchObject({ received: v(2, 1), wanted: v(3, 0), relation: 'older' });
    }
  });
});

describe('database versions', () => {
  it('compare by lastMod within a uuid and as different generations across uuids', () => {
    expect(compareDatabaseVersions({ uuid: 'a', lastMod: 1 }, { uuid: 'a', lastMod: 2 })).toBe('older');
    expect(compareDatabaseVersions({ uuid: 'a', lastMod: 1 }, { uuid: 'b', lastMod: 1 })).toBe('differentGeneration');
    expect(() => checkDatabaseVersion('db', { uuid: 'a', lastMod: 1 }, { uuid: 'a', lastMod: 2 })).toThrow(
      expect.objectContaining({ code: 'STALE_DB_VERSION' }),
    );
  });
});

describe('cluster timestamps', () => {
  it('order by seconds, then increment, and reject out-of-range parts', () => {
    expect(compareClusterTimestamps({ t: 1, i: 9 }, { t: 2, i: 0 })).toBe(-1);
    expect(compareClusterTimestamps({ t: 2, i: 1 }, { t: 2, i: 0 })).toBe(1);
    expect(() => makeClusterTimestamp(-1, 0)).toThrow(TesseraError);
  });
});
