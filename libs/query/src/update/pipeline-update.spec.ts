import { Decimal128, ObjectId } from 'bson';
import { describe, expect, it } from 'vitest';
import { thrownBy } from '../../../../test/errors.js';
import { applyUpdate } from './apply-update.js';
import { applyUpdatePipeline } from './pipeline-update.js';
import { upsertDocument } from './upsert.js';

const now = new Date('2026-11-26T12:00:00Z');

describe('update pipelines', () => {
  it("reads the update's let variables as $$name, in an upsert's new document too", () => {
    expect(applyUpdatePipeline({ _id: 1, a: 2 }, [{ $set: { a: { $multiply: ['$a', '$$factor'] } } }], now, { factor: 3 })).toEqual({
      _id: 1,
      a: 6,
    });
    expect(upsertDocument({ _id: 2 }, [{ $set: { a: '$$start' } }], { now, variables: { start: 7 } })).toEqual({ _id: 2, a: 7 });
  });

  it('runs $set, $unset, $project, $replaceWith in order, with expressions over the fields, $$ROOT and $$NOW', () => {
    const id = new ObjectId('0102030405060708090a0b0c');
    const before = { _id: id, a: 1, b: 'x', c: { d: 2 }, at: new Date('2020-01-01T00:00:00Z') };
    const after = applyUpdatePipeline(
      before,
      [
        { $set: { a: { $add: ['$a', 10] }, copy: '$$ROOT.b', stamped: '$$NOW' } },
        { $unset: ['c'] },
        { $addFields: { n: { $toUpper: '$b' } } },
      ],
      now,
    );
    expect(after).toEqual({ _id: id, a: 11, b: 'x', at: new Date('2020-01-01T00:00:00Z'), copy: 'x', stamped: now, n: 'X' });
    // Values of the document stay what they were: an ObjectId is still one, the input is untouched.
    expect(after['_id']).toBeInstanceOf(ObjectId);
    expect(before).toEqual({ _id: id, a: 1, b: 'x', c: { d: 2 }, at: new Date('2020-01-01T00:00:00Z') });
    expect(applyUpdatePipeline({ _id: 1, a: { b: 2 }, z: 0 }, [{ $replaceWith: { $mergeObjects: [{ _id: '$_id' }, '$a'] } }], now)).toEqual(
      {
        _id: 1,
        b: 2,
      },
    );
    expect(applyUpdatePipeline({ _id: 1, a: 1, b: 2 }, [{ $project: { a: 1 } }], now)).toEqual({ _id: 1, a: 1 });
  });

  it('leaves $$NOW inside $literal as the text it is', () => {
    expect(applyUpdatePipeline({ _id: 1 }, [{ $set: { s: { $literal: '$$NOW' } } }], now)).toEqual({ _id: 1, s: '$$NOW' });
  });

  it('keeps a Decimal128 it does not touch', () => {
    const price = Decimal128.fromString('9.99');
    const after = applyUpdatePipeline({ _id: 1, price }, [{ $set: { seen: true } }], now);
    expect(after['price']).toBeInstanceOf(Decimal128);
  });

  it.each<[string, unknown[], string, RegExp]>([
    [
      'a stage MongoDB does not allow in an update',
      [{ $match: { a: 1 } }],
      'FAILED_TO_PARSE',
      /\$match is not allowed to be used within an update/,
    ],
    ['a stage with two fields', [{ $set: { a: 1 }, $unset: 'b' }], 'FAILED_TO_PARSE', /exactly one field/],
    ['a stage that is not a document', [3], 'FAILED_TO_PARSE', /exactly one field/],
    ['an unknown expression operator', [{ $set: { a: { $nope: 1 } } }], 'BAD_VALUE', /The update pipeline failed/],
  ])('refuses %s', (_name, pipeline, code, message) => {
    const error = thrownBy(() => applyUpdatePipeline({ _id: 1, a: 1 }, pipeline, now));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('is an update like the others: _id stays immutable, and an unchanged document is not modified', () => {
    expect(thrownBy(() => applyUpdate({ _id: 1, a: 1 }, [{ $set: { _id: 2 } }], { now })).code).toBe('IMMUTABLE_FIELD');
    expect(applyUpdate({ _id: 1, a: 1 }, [{ $set: { a: 1 } }], { now }).modified).toBe(false);
    expect(applyUpdate({ _id: 1, a: 1 }, [{ $set: { a: 2 } }], { now })).toEqual({ doc: { _id: 1, a: 2 }, modified: true });
  });

  it("upserts by running the pipeline on the filter's equality fields", () => {
    expect(upsertDocument({ _id: 5, k: 'a' }, [{ $set: { n: { $concat: ['$k', '-new'] } } }], { now })).toEqual({
      _id: 5,
      k: 'a',
      n: 'a-new',
    });
  });
});
