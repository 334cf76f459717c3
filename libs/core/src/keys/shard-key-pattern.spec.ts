import { BSONRegExp, Long, MaxKey, MinKey, ObjectId } from 'bson';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import { hash64 } from '../hashing/hashed-value.js';
import type { Value, ValueObject } from '../values/value.js';
import {
  extractShardKey,
  extractShardKeyFromWire,
  globalMaxKey,
  globalMinKey,
  isHashedShardKey,
  parseShardKeyPattern,
  shardKeyFromEqualityQuery,
  shardKeyFromObject,
  shardKeyPatternToObject,
  shardKeyToObject,
} from './shard-key-pattern.js';

function badValueField(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(TesseraError);
    expect((error as TesseraError).code).toBe('BAD_VALUE');
    return (error as TesseraError).details?.['field'];
  }
  throw new Error('expected a BAD_VALUE error');
}

describe('parseShardKeyPattern', () => {
  it('accepts ranged, hashed, compound and dotted fields and gives them back in order', () => {
    const pattern = parseShardKeyPattern({ region: 1, 'user.id': 'hashed' });
    expect(pattern.fields).toEqual([
      { path: 'region', hashed: false },
      { path: 'user.id', hashed: true },
    ]);
    expect(isHashedShardKey(pattern)).toBe(true);
    expect(shardKeyPatternToObject(pattern)).toEqual({ region: 1, 'user.id': 'hashed' });
  });

  it.each<[string, Record<string, unknown>]>([
    ['an empty pattern', {}],
    ['a descending field', { a: -1 }],
    ['two hashed fields', { a: 'hashed', b: 'hashed' }],
    ['an empty path segment', { 'a..b': 1 }],
    ['a $-prefixed segment', { $a: 1 }],
    ['overlapping paths', { a: 1, 'a.b': 1 }],
  ])('rejects %s with BAD_VALUE', (_name, spec) => {
    expect(() => parseShardKeyPattern(spec)).toThrow(TesseraError);
  });
});

describe('extractShardKey', () => {
  const pattern = parseShardKeyPattern({ region: 1, 'user.id': 1 });

  it('reads values at dotted paths in pattern order', () => {
    expect(extractShardKey(pattern, { user: { id: 7 }, region: 'eu' })).toEqual(['eu', 7]);
  });

  it('gives null for a missing field or a path through a non-object', () => {
    expect(extractShardKey(pattern, { region: 'eu' })).toEqual(['eu', null]);
    expect(extractShardKey(pattern, { region: 'eu', user: 5 })).toEqual(['eu', null]);
  });

  it('rejects an array value and names the field', () => {
    expect(badValueField(() => extractShardKey(pattern, { region: ['eu'], user: { id: 1 } }))).toBe('region');
  });

  it('rejects an array along the path and names the field', () => {
    expect(badValueField(() => extractShardKey(pattern, { region: 'eu', user: [{ id: 1 }] }))).toBe('user.id');
  });

  it('rejects a regular expression and names the field', () => {
    expect(badValueField(() => extractShardKey(pattern, { region: new BSONRegExp('^e', ''), user: { id: 1 } }))).toBe('region');
    expect(badValueField(() => extractShardKey(pattern, { region: /^e/, user: { id: 1 } }))).toBe('region');
  });

  it("hashes the hashed field with MongoDB's hash, null when missing", () => {
    const hashed = parseShardKeyPattern({ region: 1, uid: 'hashed' });
    const [region, uid] = extractShardKey(hashed, { region: 'eu', uid: 42 });
    expect(region).toBe('eu');
    expect((uid as Long).toBigInt()).toBe(-944302157085130861n);
    expect((extractShardKey(hashed, { region: 'eu' })[1] as Long).toBigInt()).toBe(hash64(null));
  });
});

describe('extractShardKeyFromWire', () => {
  it('decodes only the key fields of a document as it came', () => {
    const pattern = parseShardKeyPattern({ region: 1, 'user.id': 1 });
    const wire = { region: 'eu', user: { id: { $numberLong: '7' } }, other: { $oid: 'not an ObjectId' } };
    expect(extractShardKeyFromWire(pattern, wire)).toEqual(['eu', 7n]);
  });

  it('reads a generated _id the document lacks from `id`, and the _id it has otherwise', () => {
    const pattern = parseShardKeyPattern({ _id: 'hashed' });
    const id = new ObjectId('0102030405060708090a0b0c');
    expect(extractShardKeyFromWire(pattern, { a: 1 }, id)).toEqual(extractShardKey(pattern, { _id: id, a: 1 }));
    expect(extractShardKeyFromWire(pattern, { _id: 5 }, id)).toEqual(extractShardKey(pattern, { _id: 5 }));
  });
});

describe('shard key object forms', () => {
  const pattern = parseShardKeyPattern({ a: 1, 'b.c': 1 });

  it('round-trip through the dotted-path object form', () => {
    const key: Value[] = [5, 'x'];
    expect(shardKeyToObject(pattern, key)).toEqual({ a: 5, 'b.c': 'x' });
    expect(shardKeyFromObject(pattern, { 'b.c': 'x', a: 5 })).toEqual(key);
  });

  it('reject a missing or an extra field, and a key of the wrong length', () => {
    expect(badValueField(() => shardKeyFromObject(pattern, { a: 5 }))).toBe('b.c');
    expect(() => shardKeyFromObject(pattern, { a: 5, 'b.c': 1, z: 1 })).toThrow(TesseraError);
    expect(() => shardKeyToObject(pattern, [1])).toThrow(TesseraError);
  });

  it('span the key space from all-MinKey to all-MaxKey', () => {
    expect(globalMinKey(pattern)).toEqual([new MinKey(), new MinKey()]);
    expect(globalMaxKey(pattern)).toEqual([new MaxKey(), new MaxKey()]);
  });
});

describe('shardKeyFromEqualityQuery', () => {
  const pattern = parseShardKeyPattern({ a: 1, 'b.c': 'hashed' });

  it.each<[string, ValueObject, boolean]>([
    ['dotted equality on every field', { a: 1, 'b.c': 2 }, true],
    ['nested equality', { a: 1, b: { c: 2 } }, true],
    ['$eq', { a: { $eq: 1 }, 'b.c': 2 }, true],
    ['a missing field', { a: 1 }, false],
    ['a range operator', { a: { $gt: 1 }, 'b.c': 2 }, false],
  ])('pins the key for %s: %s', (_name, query, pinned) => {
    const key = shardKeyFromEqualityQuery(pattern, query);
    expect(key !== undefined).toBe(pinned);
    if (key) expect((key[1] as Long).toBigInt()).toBe(hash64(2));
  });
});
