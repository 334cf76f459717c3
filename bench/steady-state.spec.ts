import { describe, expect, it } from 'vitest';
import { isSteady } from './steady-state.js';

describe('isSteady', () => {
  it.each([
    { scores: [], steady: false },
    { scores: [100, 100, 100], steady: false },
    { scores: [100, 101, 99, 102], steady: true },
    // The router's single inserts in 5 s windows: 1721 is still a new best (3.5% above 1662).
    { scores: [647, 1133, 1287, 1498, 1662], steady: false },
    { scores: [647, 1133, 1287, 1498, 1662, 1721, 1557, 1700], steady: false },
    { scores: [647, 1133, 1287, 1498, 1662, 1721, 1557, 1700, 1690], steady: true },
    // A dip does not end a climb: a new best more than 3% above the best before it restarts the count.
    { scores: [100, 90, 95, 104, 100, 100], steady: false },
    { scores: [100, 90, 95, 103, 100, 100], steady: true },
  ])('$scores: steady $steady', ({ scores, steady }) => {
    expect(isSteady(scores)).toBe(steady);
  });
});
