import { Binary, BSONRegExp, Decimal128, Double, Int32, Long, MaxKey, MinKey, ObjectId, Timestamp } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import { arbDouble, arbInt64, arbValue } from '../testing/arbitraries.spec.js';
import { compareNumbers, compareValues } from './compare-values.js';
import type { Value } from './value.js';

/** Exact value of a finite double as numerator / 2^shift, for an oracle independent of the code under test. */
function exactRational(d: number): { num: bigint; shift: bigint } {
  let shift = 0n;
  let x = d;
  while (!Number.isInteger(x)) {
    x *= 2;
    shift++;
  }
  return { num: BigInt(x), shift };
}

function oracleCompare(a: number | bigint, b: number | bigint): number {
  const isNan = (x: number | bigint) => typeof x === 'number' && Number.isNaN(x);
  if (isNan(a) || isNan(b)) return isNan(a) && isNan(b) ? 0 : isNan(a) ? -1 : 1;
  const inf = (x: number | bigint) => (typeof x === 'number' && !Number.isFinite(x) ? Math.sign(x) : 0);
  if (inf(a) || inf(b)) return Math.sign(inf(a) - inf(b));
  const ra = typeof a === 'bigint' ? { num: a, shift: 0n } : exactRational(a);
  const rb = typeof b === 'bigint' ? { num: b, shift: 0n } : exactRational(b);
  const shift = ra.shift > rb.shift ? ra.shift : rb.shift;
  const x = ra.num << (shift - ra.shift);
  const y = rb.num << (shift - rb.shift);
  return x < y ? -1 : x > y ? 1 : 0;
}

describe('compareValues', () => {
  const ascending: [string, Value][] = [
    ['MinKey', new MinKey()],
    ['null', null],
    ['NaN', NaN],
    ['-Infinity', -Infinity],
    ['a negative number', -5],
    ['zero', 0],
    ['a positive number', 3.5],
    ['+Infinity', Infinity],
    ['the empty string', ''],
    ['a string', 'abc'],
    ['an empty object', {}],
    ['an object', { a: 1 }],
    ['an empty array', []],
    ['an array', [1]],
    ['binary data', new Binary(new Uint8Array([1]), 0)],
    ['an ObjectId', new ObjectId('000000000000000000000001')],
    ['false', false],
    ['true', true],
    ['a date', new Date(0)],
    ['a timestamp', new Timestamp({ t: 1, i: 1 })],
    ['a regex', new BSONRegExp('a', '')],
    ['MaxKey', new MaxKey()],
  ];

  it.each(ascending.slice(1).map((entry, i) => [ascending[i]?.[0], entry[0], ascending[i]?.[1], entry[1]] as const))(
    'orders %s below %s',
    (_lowName, _highName, low, high) => {
      expect(compareValues(low as Value, high as Value)).toBe(-1);
      expect(compareValues(high as Value, low as Value)).toBe(1);
    },
  );

  it('treats 1, 1.0, Int32(1), Double(1), Long(1) and 1n as equal', () => {
    const ones: Value[] = [1, 1.0, new Int32(1), new Double(1), Long.fromNumber(1), 1n];
    for (const a of ones) for (const b of ones) expect(compareValues(a, b)).toBe(0);
  });

  it('orders int64 beyond 2^53 exactly against doubles', () => {
    expect(compareValues(Long.fromBigInt(2n ** 53n + 1n), 2 ** 53)).toBe(1);
    expect(compareValues(2 ** 53, Long.fromBigInt(2n ** 53n + 1n))).toBe(-1);
    expect(compareValues(Long.fromBigInt(2n ** 63n - 1n), 2 ** 63)).toBe(-1);
    expect(compareValues(-(2n ** 53n) - 1n, -(2 ** 53))).toBe(-1);
    expect(compareValues(5n, 5.5)).toBe(-1);
    expect(compareValues(-5n, -5.5)).toBe(1);
  });

  it('treats -0 as 0 and NaN as equal to NaN', () => {
    expect(compareValues(-0, 0)).toBe(0);
    expect(compareValues(NaN, new Double(NaN))).toBe(0);
  });

  it('compares strings by code point, not by UTF-16 unit', () => {
    expect(compareValues('\u{1F600}', '\uffff')).toBe(1);
    expect(compareValues('a', 'a\u0000')).toBe(-1);
    expect(compareValues('a\u0000', 'a\u0001')).toBe(-1);
  });

  it('compares object fields by type, then name, then value, and a prefix first', () => {
    expect(compareValues({ a: 1 }, { a: 1, b: new MinKey() })).toBe(-1);
    expect(compareValues({ b: 1 }, { a: 'x' })).toBe(-1);
    expect(compareValues({ a: 2 }, { b: 1 })).toBe(-1);
  });

  it('orders binary data by length, then subtype, then bytes', () => {
    expect(compareValues(new Binary(new Uint8Array([9]), 128), new Binary(new Uint8Array([0, 0]), 0))).toBe(-1);
    expect(compareValues(new Binary(new Uint8Array([9]), 0), new Binary(new Uint8Array([0]), 4))).toBe(-1);
  });

  it('rejects Decimal128 with BAD_VALUE', () => {
    expect(() => compareValues(Decimal128.fromString('1'), 1)).toThrow(TesseraError);
  });

  it('compares numbers exactly like a rational-arithmetic oracle', () => {
    const arb = fc.oneof(arbDouble, arbInt64);
    fc.assert(
      fc.property(arb, arb, (a, b) => compareNumbers(a, b) === oracleCompare(a, b)),
      { numRuns: 3000 },
    );
  });

  it('is a total order: antisymmetric and transitive', () => {
    fc.assert(
      fc.property(arbValue, arbValue, arbValue, (a, b, c) => {
        expect(compareValues(a, b)).toBe(-compareValues(b, a) || 0);
        if (compareValues(a, b) <= 0 && compareValues(b, c) <= 0) expect(compareValues(a, c)).toBeLessThanOrEqual(0);
      }),
      { numRuns: 2000 },
    );
  });
});
