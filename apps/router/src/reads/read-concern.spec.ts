import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { resolveReadConcern } from './read-concern.js';

const now = { t: 1_700_000_000, i: 5 };
const ts = (t: number, i: number) => ({ $timestamp: { t, i } });
const codeOf = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    return error instanceof TesseraError ? error.code : 'other';
  }
  return 'none';
};

describe('readConcern', () => {
  it('passes afterClusterTime to the shards at any level but snapshot', () => {
    expect(resolveReadConcern(undefined, now)).toEqual({});
    expect(resolveReadConcern({ level: 'majority' }, now)).toEqual({});
    expect(resolveReadConcern({ afterClusterTime: ts(1_700_000_000, 5) }, now)).toEqual({ shards: { afterClusterTime: now } });
  });

  it('reads a snapshot at atClusterTime, or at the router’s time when it has none', () => {
    expect(resolveReadConcern({ level: 'snapshot', atClusterTime: ts(1_600_000_000, 1) }, now)).toEqual({
      shards: { atClusterTime: { t: 1_600_000_000, i: 1 } },
      atClusterTime: { t: 1_600_000_000, i: 1 },
    });
    expect(resolveReadConcern({ level: 'snapshot', afterClusterTime: ts(1, 1) }, now)).toEqual({
      shards: { atClusterTime: now },
      atClusterTime: now,
    });
  });

  it('refuses with InvalidOptions a time past the router’s, atClusterTime without snapshot, and both times', () => {
    expect(codeOf(() => resolveReadConcern({ afterClusterTime: ts(1_700_000_000, 6) }, now))).toBe('INVALID_OPTIONS');
    expect(codeOf(() => resolveReadConcern({ level: 'snapshot', atClusterTime: ts(1_700_000_001, 0) }, now))).toBe('INVALID_OPTIONS');
    expect(codeOf(() => resolveReadConcern({ level: 'local', atClusterTime: ts(1, 1) }, now))).toBe('INVALID_OPTIONS');
    expect(codeOf(() => resolveReadConcern({ level: 'snapshot', atClusterTime: ts(1, 1), afterClusterTime: ts(1, 1) }, now))).toBe(
      'INVALID_OPTIONS',
    );
  });
});
