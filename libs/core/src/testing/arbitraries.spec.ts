/**
 * fast-check arbitraries for values and keys, shared by the property tests of core.
 * (A spec file so that core's non-test code imports nothing but `bson`.)
 */
import { Binary, BSONRegExp, Double, Int32, Long, MaxKey, MinKey, ObjectId, Timestamp } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { typeBracketOf } from '../values/value.js';
import type { Value } from '../values/value.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Doubles, including the awkward ones (NaN, ±0, ±Infinity, subnormals, huge). */
export const arbDouble: fc.Arbitrary<number> = fc.oneof(
  fc.double(),
  fc.integer({ min: -1000, max: 1000 }),
  fc.constantFrom(
    NaN,
    0,
    -0,
    Infinity,
    -Infinity,
    Number.MIN_VALUE,
    -Number.MIN_VALUE,
    Number.MAX_VALUE,
    2 ** 53,
    2 ** 63,
    -(2 ** 63),
    0.5,
    -0.5,
  ),
);

/** int64 values, biased towards the 2^53 boundary where doubles lose precision. */
export const arbInt64: fc.Arbitrary<bigint> = fc.oneof(
  fc.bigInt({ min: INT64_MIN, max: INT64_MAX }),
  fc.bigInt({ min: -5n, max: 5n }).map((d) => 2n ** 53n + d),
  fc.bigInt({ min: -5n, max: 5n }).map((d) => -(2n ** 53n) + d),
  fc.constantFrom(INT64_MIN, INT64_MAX, 0n, 1n, -1n),
);

/** Numbers in every representation: JS number, bigint, Long, Int32, Double. */
export const arbNumber: fc.Arbitrary<Value> = fc.oneof(
  arbDouble,
  arbInt64,
  arbInt64.map((n) => Long.fromBigInt(n)),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }).map((n) => new Int32(n)),
  arbDouble.map((n) => new Double(n)),
);

/** Strings including embedded NULs, non-BMP characters and U+E000-U+FFFF. */
export const arbString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.string({ unit: 'binary', maxLength: 6 }),
  fc.array(fc.constantFrom('\u0000', 'a', 'b', '\uffff', '\u{1F600}', '\ue000', 'é'), { maxLength: 5 }).map((a) => a.join('')),
);

const arbScalar: fc.Arbitrary<Value> = fc.oneof(
  fc.constant(new MinKey()),
  fc.constant(new MaxKey()),
  fc.constant(null),
  arbNumber,
  arbString,
  fc.boolean(),
  fc.integer({ min: -8_640_000_000_000_000, max: 8_640_000_000_000_000 }).map((ms) => new Date(ms)),
  fc.uint8Array({ minLength: 12, maxLength: 12 }).map((b) => new ObjectId(b)),
  fc.tuple(fc.uint8Array({ maxLength: 4 }), fc.constantFrom(0, 128)).map(([b, t]) => new Binary(b, t)),
  fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) => new Binary(b, 4)), // UUIDs are 16 bytes
  fc.tuple(fc.nat({ max: 0xffffffff }), fc.nat({ max: 0xffffffff })).map(([t, i]) => new Timestamp({ t, i })),
  fc.tuple(fc.constantFrom('a', 'a.*', ''), fc.constantFrom('', 'i', 'im')).map(([p, f]) => new BSONRegExp(p, f)),
);

/** Any supported value, nested objects and arrays included. */
export const arbValue: fc.Arbitrary<Value> = fc.letrec<{ value: Value }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    arbScalar,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom('a', 'b', 'ab', 'é', 'z', '1'), tie('value'), { maxKeys: 3 }),
  ),
})).value;

/** A compound key of 1-3 values. */
export const arbKey: fc.Arbitrary<Value[]> = fc.array(arbValue, { minLength: 1, maxLength: 3 });

describe('the test arbitraries', () => {
  it('generate every supported type bracket', () => {
    const seen = new Set(fc.sample(arbValue, { numRuns: 3000, seed: 7 }).map((v) => typeBracketOf(v)));
    expect([...seen].sort()).toEqual(
      [
        'array',
        'binData',
        'bool',
        'date',
        'maxKey',
        'minKey',
        'null',
        'number',
        'object',
        'objectId',
        'regex',
        'string',
        'timestamp',
      ].sort(),
    );
  });
});
