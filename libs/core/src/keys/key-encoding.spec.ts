import { Long, MaxKey, MinKey } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import { arbKey, arbNumber, arbValue } from '../testing/arbitraries.spec.js';
import { compareBytes, compareValues } from '../values/compare-values.js';
import type { Value } from '../values/value.js';
import {
  binaryStringToBytes,
  bytesToBinaryString,
  decodeKey,
  encodedKeyFromHex,
  encodedKeyToHex,
  encodeKey,
  encodeKeyToBinaryString,
  KEY_SPACE_END,
} from './key-encoding.js';

function compareKeysByValue(a: readonly Value[], b: readonly Value[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const c = compareValues(a[i] as Value, b[i] as Value);
    if (c !== 0) return c;
  }
  return Math.sign(a.length - b.length);
}

describe('encodeKey', () => {
  it('orders bytes as values are ordered, for single values of every supported type', () => {
    fc.assert(
      fc.property(arbValue, arbValue, (a, b) => compareBytes(encodeKey([a]), encodeKey([b])) === compareValues(a, b)),
      { numRuns: 5000 },
    );
  });

  it('orders bytes as values are ordered, for numbers of every width', () => {
    fc.assert(
      fc.property(arbNumber, arbNumber, (a, b) => compareBytes(encodeKey([a]), encodeKey([b])) === compareValues(a, b)),
      { numRuns: 5000 },
    );
  });

  it('orders compound keys of equal arity field by field', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: 3 })
          .chain((n) => fc.tuple(fc.array(arbValue, { minLength: n, maxLength: n }), fc.array(arbValue, { minLength: n, maxLength: n }))),
        ([a, b]) => compareBytes(encodeKey(a), encodeKey(b)) === compareKeysByValue(a, b),
      ),
      { numRuns: 3000 },
    );
  });

  it('keeps compound keys that share a first field ordered by the second', () => {
    fc.assert(
      fc.property(
        arbValue,
        arbValue,
        arbValue,
        (head, x, y) => compareBytes(encodeKey([head, x]), encodeKey([head, y])) === compareValues(x, y),
      ),
      { numRuns: 2000 },
    );
  });

  it('gives equal bytes to equal numbers of different types', () => {
    const one = encodedKeyToHex(encodeKey([1]));
    expect(encodedKeyToHex(encodeKey([1n]))).toBe(one);
    expect(encodedKeyToHex(encodeKey([Long.fromNumber(1)]))).toBe(one);
    expect(encodedKeyToHex(encodeKey([-0]))).toBe(encodedKeyToHex(encodeKey([0])));
  });

  it('encodes a Long, signed or unsigned, as the int64 it holds (from its halves, without a bigint)', () => {
    const int64 = fc.oneof(
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      fc.constantFrom(0n, 1n, -1n, 2n ** 32n, -(2n ** 32n), 2n ** 31n, 2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n),
      fc.integer({ min: 0, max: 63 }).map((e) => -(2n ** BigInt(e))),
    );
    fc.assert(
      fc.property(int64, (value) => {
        expect(encodedKeyToHex(encodeKey([Long.fromBigInt(value)]))).toBe(encodedKeyToHex(encodeKey([value])));
        const unsigned = BigInt.asUintN(64, value);
        expect(encodedKeyToHex(encodeKey([Long.fromBigInt(unsigned, true)]))).toBe(encodedKeyToHex(encodeKey([unsigned])));
      }),
      { numRuns: 3000 },
    );
  });

  it('orders 2^53 + 1 as Long above 2^53 as double', () => {
    expect(compareBytes(encodeKey([Long.fromBigInt(2n ** 53n + 1n)]), encodeKey([2 ** 53]))).toBe(1);
  });

  it('ends the key space above every key, MaxKey included', () => {
    for (const value of [new MaxKey(), 'zzz', Number.MAX_VALUE, new Date(8.64e15), true]) {
      expect(compareBytes(KEY_SPACE_END, encodeKey([value, new MaxKey()]))).toBe(1);
    }
  });

  it('places MinKey below and MaxKey above every value in every position', () => {
    fc.assert(
      fc.property(arbValue, arbValue, (a, b) => {
        expect(compareBytes(encodeKey([a, new MinKey()]), encodeKey([a, b]))).toBeLessThanOrEqual(0);
        expect(compareBytes(encodeKey([a, new MaxKey()]), encodeKey([a, b]))).toBeGreaterThanOrEqual(0);
      }),
    );
  });

  it('orders strings with embedded NUL bytes correctly', () => {
    const sorted = ['', '\u0000', '\u0000\u0000', '\u0000a', 'a', 'a\u0000', 'a\u0000\u0000', 'a\u0001', 'b'];
    const encoded = sorted.map((s) => encodeKey([s, 1]));
    for (let i = 1; i < encoded.length; i++) expect(compareBytes(encoded[i - 1] as Uint8Array, encoded[i] as Uint8Array)).toBe(-1);
  });

  it('rejects unsupported types with BAD_VALUE', () => {
    expect(() => encodeKey([undefined as unknown as Value])).toThrow(TesseraError);
  });
});

describe('decodeKey', () => {
  it('gives back values equal to those encoded, which encode to the same bytes', () => {
    fc.assert(
      fc.property(arbKey, (key) => {
        const bytes = encodeKey(key);
        const decoded = decodeKey(bytes);
        expect(compareKeysByValue(decoded, key)).toBe(0);
        expect(encodedKeyToHex(encodeKey(decoded))).toBe(encodedKeyToHex(bytes));
      }),
      { numRuns: 3000 },
    );
  });

  it('gives back int64 beyond 2^53 as an exact Long', () => {
    const [value] = decodeKey(encodeKey([2n ** 62n + 3n]));
    expect(value).toBeInstanceOf(Long);
    expect((value as Long).toBigInt()).toBe(2n ** 62n + 3n);
  });

  it('rejects bytes no key encodes to with BAD_VALUE', () => {
    expect(() => decodeKey(Uint8Array.from([0x99]))).toThrow(TesseraError);
    expect(() => decodeKey(Uint8Array.from([0x0f, 0x61]))).toThrow(TesseraError);
  });
});

describe('binary strings and hex', () => {
  it('compare like the bytes they hold and round-trip', () => {
    fc.assert(
      fc.property(arbKey, arbKey, (a, b) => {
        const sa = encodeKeyToBinaryString(a);
        const sb = encodeKeyToBinaryString(b);
        expect(sa < sb ? -1 : sa > sb ? 1 : 0).toBe(compareBytes(encodeKey(a), encodeKey(b)));
        expect(encodedKeyToHex(binaryStringToBytes(sa))).toBe(encodedKeyToHex(encodeKey(a)));
        expect(bytesToBinaryString(encodeKey(a))).toBe(sa);
        expect(encodedKeyFromHex(encodedKeyToHex(encodeKey(a)))).toEqual(encodeKey(a));
      }),
    );
  });
});
