import { Long, MaxKey, MinKey, ObjectId } from 'bson';
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
