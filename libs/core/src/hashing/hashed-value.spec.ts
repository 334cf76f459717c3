/**
 * Test vectors from MongoDB's src/mongo/db/hasher_test.cpp ("These tests form test vectors for
 * hashed indexes. All of the values in these tests have been determined experimentally.").
 */
import { Binary, BSONRegExp, Double, Int32, Long, MaxKey, MinKey, ObjectId } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Value } from '../values/value.js';
import { hash64, hashShardKeyValue, squashNumberForHash } from './hashed-value.js';

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

describe('hash64 matches MongoDB hasher_test.cpp', () => {
  it.each<[string, Value, bigint]>([
    ['int 42', new Int32(42), -944302157085130861n],
    ['double 42.123', 42.123, -944302157085130861n],
    ['long 42', Long.fromNumber(42), -944302157085130861n],
    ['int 0', 0, 4854801880128277513n],
    ['double 0.456', 0.456, 4854801880128277513n],
    ['NaN (treated as zero)', NaN, 4854801880128277513n],
    ['int 1', 1, 5902408780260971510n],
    ['double 1.987', new Double(1.987), 5902408780260971510n],
    ['int -1', -1, 1140205862565771219n],
    ['double -1.789', -1.789, 1140205862565771219n],
    ['long -1', -1n, 1140205862565771219n],
    ['int32 min', INT32_MIN, 6165898260261354870n],
    ['long int32 min', BigInt(INT32_MIN), 6165898260261354870n],
    ['int32 max', INT32_MAX, 1143184177162245883n],
    ['double max (saturates)', Number.MAX_VALUE, 921523596458303250n],
    ['long max', 2n ** 63n - 1n, 921523596458303250n],
    ['-double max (saturates)', -Number.MAX_VALUE, 4532067210535695462n],
    ['long min', -(2n ** 63n), 4532067210535695462n],
    ['MinKey', new MinKey(), 7961148599568647290n],
    ['MaxKey', new MaxKey(), 5504842513779440750n],
    ['string "abc"', 'abc', 8478485326885698097n],
    ['empty string', '', 2049396243249673340n],
    ['object {a: "abc", b: 123LL}', { a: 'abc', b: Long.fromNumber(123) }, 4771603801758380216n],
    ['empty object', {}, 7980500913326740417n],
    ['array ["bar", "baz", "qux"]', ['bar', 'baz', 'qux'], -2938911267422831539n],
    ['empty array', [], 8849948234993459283n],
    ['binary general', new Binary(Uint8Array.from([0, 1, 2, 3, 4, 6]), 0), 7252465090394235301n],
    ['binary custom', new Binary(Uint8Array.from([0, 1, 2, 3, 4, 6]), 128), 5736670452907618262n],
    [
      'binary UUID',
      new Binary(
        Uint8Array.from({ length: 16 }, (_, i) => i),
        4,
      ),
      6084661258071355978n,
    ],
    ['ObjectId 010203040506070809101112', new ObjectId('010203040506070809101112'), -5588663249627035708n],
    ['ObjectId 000000000000000000000000', new ObjectId('000000000000000000000000'), -4293118519463489418n],
    ['true', true, 6405873908747105701n],
    ['false', false, 6289544573401934092n],
    // The vector Date_t(0x5566778811223344) is beyond the range of a JS Date, so it is left out.
    ['Date 0', new Date(0), -1178696894582842035n],
    ['regex /mongodb/', new BSONRegExp('mongodb', ''), -7275792090268217043n],
    ['regex /.*/i', new BSONRegExp('.*', 'i'), 7095855029187981886n],
  ])('hashes %s', (_name, value, expected) => {
    expect(hash64(value)).toBe(expected);
    expect(hashShardKeyValue(value).toBigInt()).toBe(expected);
  });

  it('hashes a number as the int64 it squashes to (safe integers are written without a bigint)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.maxSafeInteger(), fc.double(), fc.integer()), (n) => {
        expect(hash64(n)).toBe(hash64(squashNumberForHash(n)));
      }),
    );
  });

  it('returns the hash as a Long', () => {
    const hashed = hashShardKeyValue(new Int32(42));
    expect(hashed).toBeInstanceOf(Long);
    expect(hashed.toBigInt()).toBe(-944302157085130861n);
  });
});

describe('squashNumberForHash', () => {
  it.each<[number | bigint, bigint]>([
    [2.9, 2n],
    [-2.9, -2n],
    [NaN, 0n],
    [Infinity, 2n ** 63n - 1n],
    [-Infinity, -(2n ** 63n)],
    [2 ** 63, 2n ** 63n - 1n],
    [5n, 5n],
  ])('squashes %s to %s', (input, expected) => {
    expect(squashNumberForHash(input)).toBe(expected);
  });
});
