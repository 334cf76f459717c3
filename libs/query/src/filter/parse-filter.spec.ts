import { BSONRegExp, Int32, Long, MaxKey, MinKey, ObjectId } from 'bson';
import { describe, expect, it } from 'vitest';
import { thrownBy } from '../../../../test/errors.js';
import { fromExtendedJsonObject, parseCollation } from '@tessera/core';
import type { ValueObject } from '@tessera/core';
import { idEqualityFromFilter } from './id-equality.js';
import { compileSort } from '../sort/sort.js';
import { parseFilter, validateFilter } from './parse-filter.js';

const oid = new ObjectId('0102030405060708090a0b0c');
const doc: ValueObject = {
  _id: oid,
  n: 5,
  big: 9007199254740993n,
  long: Long.fromNumber(7),
  s: 'abc',
  nul: null,
  tags: ['red', 'blue'],
  nums: [1, 5, 9],
  items: [
    { k: 'a', q: 1 },
    { k: 'b', q: 3 },
  ],
  sub: { x: 1, y: { z: 'deep' } },
  when: new Date('2024-01-01T00:00:00Z'),
};

describe('parseFilter matching', () => {
  it.each<[string, unknown, boolean]>([
    ['an empty filter matches everything', {}, true],
    ['equality on a number', { n: 5 }, true],
    ['numbers of every width are equal', { n: Long.fromNumber(5) }, true],
    ['an int64 beyond 2^53 compares exactly', { big: 9007199254740992n }, false],
    ['an int64 beyond 2^53 equals itself', { big: 9007199254740993n }, true],
    ['$gt stays within the number bracket', { s: { $gt: 1 } }, false],
    ['$gt on a Long', { long: { $gt: 6.5 } }, true],
    ['$lte on a date', { when: { $lte: new Date('2024-01-01T00:00:00Z') } }, true],
    ['$ne', { n: { $ne: 5 } }, false],
    ['equality with an ObjectId', { _id: oid }, true],
    ['null matches a missing field', { missing: null }, true],
    ['null matches a null field', { nul: null }, true],
    ['$exists false on a missing field', { missing: { $exists: false } }, true],
    ['$exists true on a null field', { nul: { $exists: true } }, true],
    ['an array field matches one of its elements', { tags: 'blue' }, true],
    ['an array field matches the whole array', { tags: ['red', 'blue'] }, true],
    ['$in with a value and a regex', { s: { $in: [1, /^ab/] } }, true],
    ['$nin', { tags: { $nin: ['green', 'red'] } }, false],
    ['$gt on an array uses any element', { nums: { $gt: 8 } }, true],
    ['dotted path into an array of documents', { 'items.k': 'b' }, true],
    ['dotted path into an embedded document', { 'sub.y.z': 'deep' }, true],
    ['numeric path segment indexes an array', { 'nums.1': 5 }, true],
    ['a path inside an ObjectId reaches nothing', { '_id.id': { $exists: true } }, false],
    ['$elemMatch on documents', { items: { $elemMatch: { k: 'b', q: { $gte: 3 } } } }, true],
    ['$elemMatch needs one element to satisfy all', { items: { $elemMatch: { k: 'a', q: 3 } } }, false],
    ['$elemMatch on values', { nums: { $elemMatch: { $gt: 4, $lt: 6 } } }, true],
    ['$size', { tags: { $size: 2 } }, true],
    ['$size with a Long', { tags: { $size: Long.fromNumber(3) } }, false],
    ['$all', { tags: { $all: ['blue', 'red'] } }, true],
    ['$all with a missing element', { tags: { $all: ['blue', 'green'] } }, false],
    ['$all with $elemMatch', { items: { $all: [{ $elemMatch: { q: 3 } }] } }, true],
    ['$type string', { s: { $type: 'string' } }, true],
    ['$type by number (2 is string)', { s: { $type: 2 } }, true],
    ['$type long', { long: { $type: 'long' } }, true],
    ['$type int for an integral JS number', { n: { $type: 'int' } }, true],
    ['$type number', { big: { $type: 'number' } }, true],
    ['$type array', { tags: { $type: 'array' } }, true],
    ['$regex with $options', { s: { $regex: 'ABC', $options: 'i' } }, true],
    ['a BSON regex as a value', { s: new BSONRegExp('^a', '') }, true],
    ['$not with a regex', { s: { $not: /^a/ } }, false],
    ['$not with operators', { n: { $not: { $gt: 6 } } }, true],
    ['$and', { $and: [{ n: 5 }, { s: 'abc' }] }, true],
    ['$or', { $or: [{ n: 6 }, { s: 'abc' }] }, true],
    ['$nor', { $nor: [{ n: 6 }, { s: 'abc' }] }, false],
    ['$gte MinKey matches any value', { s: { $gte: new MinKey() } }, true],
    ['$lt MaxKey matches a missing field', { missing: { $lt: new MaxKey() } }, true],
    ['$gte null matches a missing field', { missing: { $gte: null } }, true],
    ['$gt null matches nothing', { nul: { $gt: null } }, false],
    ['Int32 equals a double', { n: new Int32(5) }, true],
    ['$comment is ignored', { n: 5, $comment: 'why' }, true],
  ])('%s', (_name, filter, expected) => {
    expect(parseFilter(filter).matches(doc)).toBe(expected);
  });

  it('accepts filters parsed from Extended JSON', () => {
    const filter = parseFilter(
      fromExtendedJsonObject({ _id: { $oid: '0102030405060708090a0b0c' }, big: { $gt: { $numberLong: '9007199254740992' } } }),
    );
    expect(filter.matches(doc)).toBe(true);
  });
});

describe('parseFilter errors', () => {
  it.each<[string, unknown, RegExp, Record<string, unknown>]>([
    [
      'an unknown field operator names it and the path',
      { 'a.b': { $foo: 1 } },
      /Unknown operator \$foo at 'a\.b'/,
      { operator: '$foo', path: 'a.b' },
    ],
    [
      'an unknown operator deep inside $or',
      { $or: [{ a: 1 }, { b: { $elemMatch: { c: { $bar: 1 } } } }] },
      /\$bar at 'c'/,
      { operator: '$bar' },
    ],
    ['an unknown top-level operator', { $foo: [] }, /Unknown top-level operator \$foo/, { operator: '$foo' }],
    ['$where is refused as unsupported', { $where: 'this.a > 1' }, /\$where is not supported/, { operator: '$where' }],
    ['$function is refused as unsupported', { $function: {} }, /\$function is not supported/, { operator: '$function' }],
    ['$mod is refused as unsupported', { a: { $mod: [2, 0] } }, /\$mod is not supported \(at 'a'\)/, { operator: '$mod' }],
    ['$in without an array', { a: { $in: 5 } }, /\$in at 'a' needs an array/, { operator: '$in', path: 'a' }],
    ['$and with an empty array', { $and: [] }, /\$and at '\$and' needs a non-empty array/, { operator: '$and' }],
    ['$or with a non-document', { $or: [5] }, /filter must be a document at '\$or\.0'/, { path: '$or.0' }],
    ['$size with a negative number', { a: { $size: -1 } }, /\$size at 'a' needs a non-negative integer/, { operator: '$size' }],
    ['$type with an unknown name', { a: { $type: 'thing' } }, /\$type at 'a' needs a BSON type/, { operator: '$type' }],
    ['$not with a number', { a: { $not: 5 } }, /\$not at 'a' needs a regular expression or a document/, { operator: '$not' }],
    ['mixing operators and fields', { a: { $gt: 1, b: 2 } }, /mixes operators and the field 'b'/, { path: 'a' }],
    ['an unsupported regex option', { a: { $regex: 'x', $options: 'x' } }, /option 'x' at 'a'/, { path: 'a' }],
    ['a filter that is not a document', [1, 2], /A filter must be a document/, {}],
  ])('%s', (_name, filter, message, details) => {
    const error = thrownBy(() => parseFilter(filter));
    expect(error.code).toBe('BAD_VALUE');
    expect(error.message).toMatch(message);
    expect(error.details).toMatchObject(details);
  });
});

describe('validateFilter', () => {
  it('hands a filter it normalised back as it is, and still validates a raw one', () => {
    const normalized = validateFilter({ a: new BSONRegExp('x', 'i'), $comment: 'c' }, '');
    expect(normalized).toEqual({ a: /x/i });
    expect(validateFilter(normalized, '')).toBe(normalized);
    expect(parseFilter(normalized).filter).toBe(normalized);
    expect(thrownBy(() => validateFilter({ ...normalized, $bogus: 1 }, ''))).toMatchObject({ code: 'BAD_VALUE' });
  });
});

describe('idEqualityFromFilter', () => {
  it.each<[string, unknown, unknown]>([
    ['a plain value', { _id: 5, a: 1 }, 5],
    ['$eq', { _id: { $eq: 'x' } }, 'x'],
    ['inside $and', { $and: [{ a: 1 }, { _id: oid }] }, oid],
    ['a document _id', { _id: { a: 1 } }, { a: 1 }],
    ['not a range', { _id: { $gt: 5 } }, undefined],
    ['not a regex', { _id: /x/ }, undefined],
    ['not an array', { _id: [1] }, undefined],
    ['not under $or', { $or: [{ _id: 1 }, { _id: 2 }] }, undefined],
    ['not when absent', { a: 1 }, undefined],
  ])('%s', (_name, filter, expected) => {
    expect(idEqualityFromFilter(filter)).toEqual(expected);
  });
});

describe('filters and sorts under a collation', () => {
  const docs = [{ n: 'Alice' }, { n: 'alice' }, { n: 'ALİCE' }, { n: 'bob' }, { n: 'Émile' }, { n: 'item10' }, { n: 'item9' }];
  const matching = (filter: Record<string, unknown>, collation?: ValueObject) => {
    const compiled = parseFilter(filter, parseCollation(collation));
    return docs.filter((d) => compiled.matches(d)).map((d) => d.n);
  };

  it('matches equality, $in, $ne and ranges as the collation compares strings; $regex stays by code points', () => {
    expect(matching({ n: 'alice' })).toEqual(['alice']);
    expect(matching({ n: 'alice' }, { locale: 'en', strength: 2 })).toEqual(['Alice', 'alice']);
    expect(matching({ n: { $in: ['emile', 'BOB'] } }, { locale: 'en', strength: 1 })).toEqual(['bob', 'Émile']);
    expect(matching({ n: { $ne: 'ALICE' } }, { locale: 'en', strength: 2 })).toEqual(['ALİCE', 'bob', 'Émile', 'item10', 'item9']);
    expect(matching({ n: { $gt: 'item9' } }, { locale: 'en', numericOrdering: true })).toEqual(['item10']);
    expect(matching({ n: { $regex: '^a' } }, { locale: 'en', strength: 1 })).toEqual(['alice']);
    expect(matching({ $or: [{ n: 'BOB' }, { x: { $elemMatch: { $eq: 'q' } } }] }, { locale: 'en', strength: 2 })).toEqual(['bob']);
  });

  it('sorts strings as the collation orders them', () => {
    const sorted = (collation?: ValueObject) => [...docs].sort(compileSort({ n: 1 }, parseCollation(collation))).map((d) => d.n);
    expect(sorted().slice(0, 3)).toEqual(['ALİCE', 'Alice', 'alice']);
    const numeric = sorted({ locale: 'en', numericOrdering: true });
    expect(numeric.indexOf('item9')).toBeLessThan(numeric.indexOf('item10'));
    expect(sorted({ locale: 'en' }).indexOf('Émile')).toBeLessThan(sorted({ locale: 'en' }).indexOf('item10'));
  });
});

describe('$expr in a filter', () => {
  const docs: ValueObject[] = [
    { _id: 1, spent: 80, budget: 100 },
    { _id: 2, spent: 120, budget: 100 },
    { _id: 3, spent: 5, budget: 4, tag: 'x' },
  ];
  const ids = (filter: Record<string, unknown>, variables?: ValueObject) => {
    const compiled = parseFilter(filter, undefined, variables);
    return docs.filter((d) => compiled.matches(d)).map((d) => d._id);
  };

  it('compares fields of the same document, with the let variables, alone or beside other conditions', () => {
    expect(ids({ $expr: { $gt: ['$spent', '$budget'] } })).toEqual([2, 3]);
    expect(ids({ tag: 'x', $expr: { $gt: ['$spent', '$budget'] } })).toEqual([3]);
    expect(ids({ $or: [{ _id: 1 }, { $expr: { $eq: ['$spent', 120] } }] })).toEqual([1, 2]);
    expect(ids({ $expr: { $lt: ['$spent', '$$cap'] } }, { cap: 50 })).toEqual([3]);
  });

  it('answers a failing expression with BadValue, and keeps refusing $where and $function', () => {
    expect(() => ids({ $expr: { $bogus: ['$spent'] } })).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
    expect(() => ids({ $expr: { $function: { body: 'function() { return true }', args: [], lang: 'js' } } })).toThrow(
      expect.objectContaining({ code: 'BAD_VALUE' }),
    );
    expect(() => parseFilter({ $where: 'true' })).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
  });
});
