import { EJSON, Long, MaxKey, MinKey, ObjectId } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { arbValue } from '../testing/arbitraries.spec.js';
import { compareValues } from './compare-values.js';
import { fromExtendedJsonObject, parseExtendedJson, toExtendedJson, toExtendedJsonObject } from './extended-json.js';
import { compareStrings, decodeUtf8, encodeUtf8 } from './utf8.js';
import type { Value } from './value.js';

describe('Extended JSON', () => {
  it('parses the types JSON lacks, with int64 exact', () => {
    const doc = parseExtendedJson(
      '{"id":{"$oid":"010203040506070809101112"},"n":{"$numberLong":"9007199254740993"},"d":{"$date":"2020-01-01T00:00:00Z"},"lo":{"$minKey":1},"hi":{"$maxKey":1},"x":1.5}',
    ) as Record<string, Value>;
    expect(doc['id']).toBeInstanceOf(ObjectId);
    expect(doc['n']).toBe(9007199254740993n);
    expect((doc['d'] as Date).toISOString()).toBe('2020-01-01T00:00:00.000Z');
    expect(doc['lo']).toBeInstanceOf(MinKey);
    expect(doc['hi']).toBeInstanceOf(MaxKey);
    expect(doc['x']).toBe(1.5);
  });

  it('prints int64 beyond 2^53 as $numberLong so it parses back exactly', () => {
    const text = toExtendedJson({ big: 2n ** 60n + 1n, long: Long.fromBigInt(-(2n ** 62n) - 3n), small: 5n });
    expect(text).toBe('{"big":{"$numberLong":"1152921504606846977"},"long":{"$numberLong":"-4611686018427387907"},"small":5}');
    expect(parseExtendedJson(text)).toEqual({ big: 2n ** 60n + 1n, long: -(2n ** 62n) - 3n, small: 5 });
  });

  it('round-trips every supported value to an equal value', () => {
    fc.assert(
      fc.property(arbValue, (value) => {
        expect(compareValues(fromExtendedJsonObject(toExtendedJsonObject(value)), value)).toBe(0);
        expect(compareValues(parseExtendedJson(toExtendedJson(value)), value)).toBe(0);
      }),
      { numRuns: 1000 },
    );
  });

  it('answers FAILED_TO_PARSE for malformed text', () => {
    expect(() => parseExtendedJson('{"a":')).toThrow(expect.objectContaining({ code: 'FAILED_TO_PARSE' }));
    expect(() => parseExtendedJson('{"a":{"$oid":"nothex"}}')).toThrow(expect.objectContaining({ code: 'FAILED_TO_PARSE' }));
  });
});

describe('Extended JSON without the JSON round trip', () => {
  // What extended-json.ts did before its fast paths: bson's own conversions, the reference.
  const protect = (value: unknown): unknown => {
    if (typeof value === 'bigint') return value >= -(2n ** 53n) + 1n && value <= 2n ** 53n - 1n ? Number(value) : { $numberLong: `${value}` };
    if (value instanceof Long && value._bsontype === 'Long') return protect(value.toBigInt());
    if (Array.isArray(value)) return value.map(protect);
    if (value !== null && typeof value === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(value))) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = protect(v);
      return out;
    }
    return value;
  };
  const referenceTo = (value: unknown) => EJSON.serialize(protect(value) as never, { relaxed: true });
  const referenceFrom = (json: unknown) => EJSON.deserialize(json as never, { relaxed: true, useBigInt64: true });
  const outcome = (convert: () => unknown) => {
    try {
      return { value: convert() };
    } catch {
      return { threw: true };
    }
  };
  /** Objects built with defineProperty, so that `__proto__` is a field; sometimes without a prototype. */
  const objectOf = <T>(key: fc.Arbitrary<string>, value: fc.Arbitrary<T>) =>
    fc.tuple(fc.array(fc.tuple(key, value), { maxLength: 3 }), fc.boolean()).map(([entries, bare]) => {
      const object = bare ? Object.create(null) : {};
      for (const [k, v] of entries) Object.defineProperty(object, k, { value: v, enumerable: true, writable: true, configurable: true });
      return object as Record<string, T>;
    });
  const wrappers = fc.constantFrom<unknown>(
    { $oid: '010203040506070809101112' },
    { $oid: 'not hex' },
    { $numberLong: '9007199254740993' },
    { $numberLong: '-5' },
    { $numberInt: '7' },
    { $numberDouble: '-0.0' },
    { $numberDouble: 'NaN' },
    { $date: '2020-01-01T00:00:00Z' },
    { $date: { $numberLong: '-1' } },
    { $minKey: 1 },
    { $maxKey: 1 },
    { $binary: { base64: 'AQI=', subType: '00' } },
    { $regularExpression: { pattern: 'a.*', options: 'i' } },
    { $timestamp: { t: 1, i: 2 } },
    { $undefined: true },
    { $ref: 'c', $id: 1 },
    { $gt: { $numberLong: '1' }, x: [1, { $oid: '010203040506070809101112' }] },
  );
  const arbJson: fc.Arbitrary<unknown> = fc.letrec<{ json: unknown }>((tie) => ({
    json: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.jsonValue({ maxDepth: 1 }),
      wrappers,
      fc.constantFrom<unknown>(-0, undefined, NaN, Infinity, 1n, new Date(0)),
      fc.array(tie('json'), { maxLength: 3 }),
      objectOf(fc.constantFrom('a', 'b', '1', 'é', '$in', 'nul\0', '__proto__', '_bsontype'), tie('json')),
    ),
  })).json;
  const arbLooseValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      arbValue,
      fc.constantFrom<unknown>(undefined, -0, NaN, -Infinity, 2n ** 70n),
      fc.array(tie('value'), { maxLength: 3 }),
      objectOf(fc.constantFrom('a', 'b', '1', '$set', '__proto__'), tie('value')),
    ),
  })).value;

  it('reads parsed JSON exactly as bson does, errors included', () => {
    fc.assert(
      fc.property(arbJson, (json) => {
        const fast = outcome(() => fromExtendedJsonObject(json));
        expect(fast).toStrictEqual(outcome(() => referenceFrom(json)));
      }),
      { numRuns: 3000 },
    );
  });

  it('prints values exactly as bson does', () => {
    fc.assert(
      fc.property(arbLooseValue, (value) => {
        expect(outcome(() => toExtendedJsonObject(value as Value))).toStrictEqual(outcome(() => referenceTo(value)));
      }),
      { numRuns: 3000 },
    );
  });

  it('copies: the result shares no object with the input', () => {
    const input = { a: { b: [1, { c: 2 }] } };
    const read = fromExtendedJsonObject(input) as typeof input;
    const printed = toExtendedJsonObject(input) as typeof input;
    expect(read).toEqual(input);
    expect(printed).toEqual(input);
    for (const copy of [read, printed]) {
      expect(copy.a).not.toBe(input.a);
      expect(copy.a.b).not.toBe(input.a.b);
      expect(copy.a.b[1]).not.toBe(input.a.b[1]);
    }
  });
});

describe('UTF-8', () => {
  it('encodes like TextEncoder and decodes back, lone surrogates aside', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(encodeUtf8(text)).toEqual(new TextEncoder().encode(text));
        const bytes = encodeUtf8(text);
        expect(decodeUtf8(bytes)).toBe(new TextDecoder().decode(bytes));
      }),
      { numRuns: 1000 },
    );
  });

  it('compares strings in UTF-8 byte order', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        const x = encodeUtf8(a);
        const y = encodeUtf8(b);
        let expected = 0;
        for (let i = 0; i < Math.min(x.length, y.length) && expected === 0; i++) expected = Math.sign((x[i] as number) - (y[i] as number));
        if (expected === 0) expected = Math.sign(x.length - y.length);
        expect(compareStrings(a, b)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });
});
