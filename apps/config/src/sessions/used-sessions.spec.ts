import { describe, expect, it } from 'vitest';
import { mergeUsedSessions } from './used-sessions.js';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';

describe('mergeUsedSessions', () => {
  it('keeps one use per session, sorted by id, with the later last use and the higher txnNumber', () => {
    const merged = mergeUsedSessions([
      { id: B, lastUse: '2026-01-01T00:00:02.000Z', openCursors: 1, txnNumber: 4 },
      { id: A, lastUse: '2026-01-01T00:00:01.000Z' },
      { id: B, lastUse: '2026-01-01T00:00:01.000Z', openCursors: 3 },
    ]);
    expect(merged).toEqual([
      { id: A, lastUse: new Date('2026-01-01T00:00:01.000Z'), openCursors: 0, txnNumber: null },
      { id: B, lastUse: new Date('2026-01-01T00:00:02.000Z'), openCursors: 3, txnNumber: 4 },
    ]);
  });
});
