import { Int32, Long, ObjectId, Timestamp } from 'bson';
import { describe, expect, it } from 'vitest';
import { thrownBy } from '../../../../test/errors.js';
import { parseShardKeyPattern } from '@tessera/core';
import type { ValueObject } from '@tessera/core';
import { applyUpdate, updateChangesShardKey } from './apply-update.js';
import { upsertDocument } from './upsert.js';

const now = new Date('2024-05-01T12:00:00Z');
const id = new ObjectId('0102030405060708090a0b0c');
const base: ValueObject = { _id: id, a: 1, s: 'x', arr: [1, 2, 3], sub: { b: 2 }, items: [{ k: 1 }, { k: 2 }] };

const run = (update: unknown, doc: ValueObject = base) => applyUpdate(doc, update, { now });

describe('applyUpdate operators', () => {
  it.each<[string, unknown, ValueObject]>([
    ['$set a new nested field', { $set: { 'x.y': 5 } }, { ...base, x: { y: 5 } }],
    ['$set an array element by index', { $set: { 'arr.1': 9 } }, { ...base, arr: [1, 9, 3] }],
    ['$unset', { $unset: { s: '' } }, (({ s: _s, ...rest }) => rest)(base)],
    ['$inc a number', { $inc: { a: 2 } }, { ...base, a: 3 }],
    ['$inc a missing field', { $inc: { n: 2 } }, { ...base, n: 2 }],
    ['$mul', { $mul: { a: 4 } }, { ...base, a: 4 }],
    ['$mul a missing field sets 0', { $mul: { n: 4 } }, { ...base, n: 0 }],
    ['$min lower', { $min: { a: 0 } }, { ...base, a: 0 }],
    ['$max not higher', { $max: { a: 0 } }, base],
    ['$rename', { $rename: { s: 't' } }, { _id: id, a: 1, arr: [1, 2, 3], sub: { b: 2 }, items: [{ k: 1 }, { k: 2 }], t: 'x' }],
    ['$push', { $push: { arr: 4 } }, { ...base, arr: [1, 2, 3, 4] }],
    ['$push to a missing field', { $push: { list: 'a' } }, { ...base, list: ['a'] }],
    ['$push $each $position $sort $slice', { $push: { arr: { $each: [0, 7], $sort: -1, $slice: 3 } } }, { ...base, arr: [7, 3, 2] }],
    ['$push $each at a position', { $push: { arr: { $each: [9], $position: 1 } } }, { ...base, arr: [1, 9, 2, 3] }],
    ['$addToSet skips an equal value of another numeric type', { $addToSet: { arr: Long.fromNumber(2) } }, base],
    ['$addToSet $each', { $addToSet: { arr: { $each: [3, 4, 4] } } }, { ...base, arr: [1, 2, 3, 4] }],
    ['$pull a value', { $pull: { arr: 2 } }, { ...base, arr: [1, 3] }],
    ['$pull with a condition', { $pull: { arr: { $gte: 2 } } }, { ...base, arr: [1] }],
    ['$pull documents matching a query', { $pull: { items: { k: 2 } } }, { ...base, items: [{ k: 1 }] }],
    ['$pop last', { $pop: { arr: 1 } }, { ...base, arr: [1, 2] }],
    ['$pop first', { $pop: { arr: -1 } }, { ...base, arr: [2, 3] }],
    ['$currentDate', { $currentDate: { at: true } }, { ...base, at: now }],
    [
      '$currentDate as a timestamp',
      { $currentDate: { ts: { $type: 'timestamp' } } },
      { ...base, ts: new Timestamp({ t: 1714564800, i: 1 }) },
    ],
    ['$setOnInsert is ignored outside an upsert insert', { $setOnInsert: { z: 1 } }, base],
    ['$set _id to the same value', { $set: { _id: id } }, base],
  ])('%s', (_name, update, expected) => {
    expect(run(update).doc).toEqual(expected);
  });

  it('keeps integer types exact and promotes on overflow', () => {
    expect(run({ $inc: { n: 1 } }, { n: new Int32(2 ** 31 - 1) }).doc['n']).toEqual(Long.fromBigInt(2n ** 31n));
    expect(run({ $inc: { n: 1n } }, { n: 9007199254740992n }).doc['n']).toBe(9007199254740993n);
    expect(run({ $inc: { n: 0.5 } }, { n: Long.fromNumber(1) }).doc['n']).toBe(1.5);
  });

  it('reports whether the document changed, and never touches the original', () => {
    const original = structuredClone({ a: 1, arr: [1] });
    expect(run({ $set: { a: 1 } }, original).modified).toBe(false);
    const result = run({ $push: { arr: 2 } }, original);
    expect(result.modified).toBe(true);
    expect(original).toEqual({ a: 1, arr: [1] });
  });

  it('applies $setOnInsert on an upsert insert', () => {
    expect(applyUpdate({ a: 1 }, { $setOnInsert: { b: 2 } }, { now, isUpsertInsert: true }).doc).toEqual({ a: 1, b: 2 });
  });
});

describe('applyUpdate replacement', () => {
  it('replaces every field but keeps _id first', () => {
    expect(run({ z: 1 }).doc).toEqual({ _id: id, z: 1 });
    expect(Object.keys(run({ z: 1, _id: id }).doc)).toEqual(['_id', 'z']);
  });

  it('refuses a replacement that changes _id', () => {
    expect(thrownBy(() => run({ _id: 2, z: 1 })).code).toBe('IMMUTABLE_FIELD');
  });
});

describe('applyUpdate errors', () => {
  it.each<[string, unknown, string, RegExp]>([
    ['conflicting paths', { $set: { a: 1 }, $inc: { a: 1 } }, 'BAD_VALUE', /Updating the path 'a' would create a conflict at 'a'/],
    ['a path inside another', { $set: { sub: {} }, $unset: { 'sub.b': '' } }, 'BAD_VALUE', /'sub\.b' would create a conflict at 'sub'/],
    ['$rename onto an updated path', { $rename: { s: 'a' }, $set: { a: 2 } }, 'BAD_VALUE', /conflict at 'a'/],
    ['$inc with a non-number', { $inc: { a: 'x' } }, 'TYPE_MISMATCH', /\$inc on 'a' needs a numeric argument/],
    ['$inc on a string', { $inc: { s: 1 } }, 'TYPE_MISMATCH', /\$inc on 's' cannot apply to a value of non-numeric type string/],
    ['$push on a non-array', { $push: { s: 1 } }, 'BAD_VALUE', /\$push on 's' needs an array, but the field is of type string/],
    ['$pop with 2', { $pop: { arr: 2 } }, 'BAD_VALUE', /\$pop on 'arr' needs 1 or -1/],
    ['$set through a scalar', { $set: { 'a.b': 1 } }, 'BAD_VALUE', /Cannot create field 'b' of 'a\.b'/],
    ['modifying _id', { $set: { _id: 5 } }, 'IMMUTABLE_FIELD', /would modify the immutable field '_id'/],
    ['unsetting _id', { $unset: { _id: '' } }, 'IMMUTABLE_FIELD', /immutable field '_id'/],
    ['an unknown modifier', { $foo: { a: 1 } }, 'FAILED_TO_PARSE', /Unknown modifier: \$foo/],
    ['a modifier without a document', { $set: 5 }, 'FAILED_TO_PARSE', /\$set needs a document/],
    ['mixing operators and fields', { $set: { a: 1 }, b: 2 }, 'BAD_VALUE', /cannot mix operators/],
    ['a positional path with no query', { $set: { 'arr.$': 1 } }, 'BAD_VALUE', /positional operator did not find the match/],
    ['a positional path in $rename', { $rename: { 'arr.$': 'b' } }, 'BAD_VALUE', /may not be dynamic/],
    ['a $-prefixed field', { $set: { $x: 1 } }, 'BAD_VALUE', /not valid for storage/],
  ])('%s', (_name, update, code, message) => {
    const error = thrownBy(() => run(update));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('refuses a document grown beyond 16 MiB', () => {
    expect(thrownBy(() => run({ $set: { big: 'x'.repeat(16 * 1024 * 1024) } })).code).toBe('DOCUMENT_TOO_LARGE');
  });
});

describe('updateChangesShardKey', () => {
  const pattern = parseShardKeyPattern({ a: 1 });
  it('is false when the key is equal (even as another numeric type) and true when it moves', () => {
    expect(updateChangesShardKey(pattern, { a: 1 }, { a: Long.fromNumber(1), b: 2 })).toBe(false);
    expect(updateChangesShardKey(pattern, { a: 1 }, { a: 2 })).toBe(true);
  });
  it('refuses a shard key field holding an array', () => {
    expect(thrownBy(() => updateChangesShardKey(pattern, { a: 1 }, { a: [1] })).message).toMatch(/"a" cannot hold an array/);
  });
});

describe('upsertDocument', () => {
  it('starts from the filter equality fields, then applies the update with $setOnInsert', () => {
    const doc = upsertDocument(
      { _id: 7, 'a.b': 1, c: { $eq: 2 }, d: { $gt: 3 }, $and: [{ e: 'x' }] },
      { $set: { f: 1 }, $setOnInsert: { g: 2 } },
      { now },
    );
    expect(doc).toEqual({ _id: 7, a: { b: 1 }, c: 2, e: 'x', f: 1, g: 2 });
  });
  it('a replacement keeps only the filter _id', () => {
    expect(upsertDocument({ _id: 7, a: 1 }, { z: 1 }, { now })).toEqual({ _id: 7, z: 1 });
    expect(upsertDocument({ a: 1 }, { z: 1 }, { now })).toEqual({ z: 1 });
  });
});
