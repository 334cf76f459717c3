import { describe, expect, it } from 'vitest';
import { percentile } from './percentile.js';

describe('percentile', () => {
  it.each([
    { sorted: [7], p: 50, value: 7 },
    { sorted: [1, 2, 3, 4], p: 50, value: 3 },
    { sorted: [1, 2, 3, 4], p: 25, value: 2 },
    // The 99th of fewer than 100 values is the largest, never past the end.
    { sorted: [1, 2, 3, 4], p: 99, value: 4 },
    { sorted: [1, 2, 3, 4], p: 100, value: 4 },
    { sorted: Array.from({ length: 200 }, (_, i) => i), p: 99, value: 198 },
  ])('p$p of $sorted.length values is $value', ({ sorted, p, value }) => {
    expect(percentile(sorted, p)).toBe(value);
  });
});
