import { describe, expect, it } from 'vitest';
import { SESSIONS_PER_ROW, sessionChangelogEntries } from './session-changelog.js';

describe('sessionChangelogEntries', () => {
  it('writes no row for no sessions', () => {
    expect(sessionChangelogEntries('session.ended', [], { node: 'router0' })).toEqual([]);
  });

  it('names every session once, at most a hundred per row', () => {
    const ids = Array.from({ length: SESSIONS_PER_ROW * 2 + 1 }, (_, i) => `id${i}`);
    const rows = sessionChangelogEntries('session.reaped', ids, { node: 'shard0' }, { shard: 'shard0' });
    expect(rows.map((r) => [r.what, r.shard, r.details?.count])).toEqual([
      ['session.reaped', 'shard0', 100],
      ['session.reaped', 'shard0', 100],
      ['session.reaped', 'shard0', 1],
    ]);
    expect(rows.flatMap((r) => r.details?.lsids as string[])).toEqual(ids);
  });
});
