import { Long, MinKey, ObjectId } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareValues, TesseraError } from '@tessera/core';
import type { Value, ValueObject } from '@tessera/core';
import { compileSort, parseSort, sortKeyOf } from './sort.js';

const scalar: fc.Arbitrary<Value> = fc.oneof(
  fc.double(),
  fc.integer().map((n) => Long.fromNumber(n)),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
  fc.string(),
  fc.boolean(),
  fc.constant(null),
  fc.date({ noInvalidDate: true }),
  fc.uint8Array({ minLength: 12, maxLength: 12 }).map((b) => new ObjectId(b)),
  fc.dictionary(fc.string({ maxLength: 2 }), fc.integer(), { maxKeys: 2 }),
);

describe('compileSort', () => {
  it('orders scalar fields exactly as core compareValues, and reverses for -1 (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.option(scalar, { nil: undefined }), { maxLength: 12 }), (values) => {
        const docs = values.map((v): ValueObject => (v === undefined ? {} : { a: v }));
        const key = (d: ValueObject): Value => (d['a'] === undefined ? null : (d['a'] as Value));
        const ascending = [...docs].sort(compileSort({ a: 1 }));
        const descending = [...docs].sort(compileSort({ a: -1 }));
        for (let i = 1; i < docs.length; i++) {
          expect(compareValues(key(ascending[i - 1] as ValueObject), key(ascending[i] as ValueObject))).toBeLessThanOrEqual(0);
          expect(compareValues(key(descending[i - 1] as ValueObject), key(descending[i] as ValueObject))).toBeGreaterThanOrEqual(0);
        }
      }),
    );
  });

  it.each<[string, ValueObject, 1 | -1, Value]>([
    ['a missing field sorts as null', {}, 1, null],
    ['an array sorts by its smallest element ascending', { a: [3, 1, 2] }, 1, 1],
    ['an array sorts by its largest element descending', { a: [3, 1, 2] }, -1, 3],
    ['an empty array sorts below null', { a: [] }, 1, new MinKey()],
    ['a path through an array of documents', { x: [{ a: 5 }, { a: 2 }] }, 1, 2],
  ])('%s', (_name, doc, direction, expected) => {
    const path = Object.hasOwn(doc, 'x') ? 'x.a' : 'a';
    expect(compareValues(sortKeyOf(doc, path, direction), expected)).toBe(0);
  });

  it('breaks ties on the next field', () => {
    const docs: ValueObject[] = [
      { a: 1, b: 1 },
      { a: 0, b: 2 },
      { a: 1, b: 0 },
    ];
    expect(docs.sort(compileSort({ a: -1, b: 1 }))).toEqual([
      { a: 1, b: 0 },
      { a: 1, b: 1 },
      { a: 0, b: 2 },
    ]);
  });

  it('sorts numbers across types and types in MongoDB order', () => {
    const docs: ValueObject[] = [{ a: 'x' }, { a: Long.fromNumber(2) }, { a: 1.5 }, { a: null }, { a: true }];
    expect(docs.sort(compileSort({ a: 1 })).map((d) => d['a'])).toEqual([null, 1.5, Long.fromNumber(2), 'x', true]);
  });
});

describe('parseSort', () => {
  it.each<[string, unknown, RegExp]>([
    ['a direction other than 1 or -1', { a: 2 }, /sort order of 'a' must be 1 \(ascending\) or -1/],
    ['a string direction', { a: 'asc' }, /sort order of 'a'/],
    ['$meta', { score: { $meta: 'textScore' } }, /sort order of 'score'/],
    ['a $-prefixed path', { $a: 1 }, /Invalid sort field '\$a'/],
    ['not a document', [1], /A sort must be a document/],
  ])('refuses %s', (_name, spec, message) => {
    expect(() => parseSort(spec)).toThrow(TesseraError);
    expect(() => parseSort(spec)).toThrow(message);
  });

  it('accepts 1 and -1 of any numeric type', () => {
    expect(parseSort({ a: 1, b: Long.fromNumber(-1) })).toEqual([
      { path: 'a', direction: 1 },
      { path: 'b', direction: -1 },
    ]);
  });
});
