import { Long } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { longToBigInt, numericValueOf } from './value.js';

describe('longToBigInt', () => {
  it("equals bson's own conversion for signed and unsigned Longs", () => {
    fc.assert(
      fc.property(fc.integer(), fc.integer(), fc.boolean(), (low, high, unsigned) => {
        const long = Long.fromBits(low, high, unsigned);
        expect(longToBigInt(long)).toBe(long.toBigInt());
      }),
      { numRuns: 2000 },
    );
  });

  it('is what numericValueOf answers for a Long', () => {
    expect(numericValueOf(Long.fromBigInt(-(2n ** 63n)))).toBe(-(2n ** 63n));
    expect(numericValueOf(Long.fromBigInt(2n ** 64n - 1n, true))).toBe(2n ** 64n - 1n);
  });
});
