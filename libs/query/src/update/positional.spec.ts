import { describe, expect, it } from 'vitest';
import { type ValueObject, parseCollation } from '@tessera/core';
import { thrownBy } from '../../../../test/errors.js';
import { applyUpdate } from './apply-update.js';
import type { UpdateQuery } from './positional.js';
import { upsertDocument } from './upsert.js';

const now = new Date('2026-11-27T12:00:00Z');
const update = (doc: Record<string, unknown>, u: Record<string, unknown>, query: UpdateQuery) =>
  applyUpdate(doc as never, u, { now, query }).doc;

describe('the positional $ operator', () => {
  const grades = {
    _id: 1,
    grades: [
      { g: 80, std: 8 },
      { g: 85, std: 5 },
      { g: 85, std: 8 },
    ],
    tags: ['a', 'b', 'c'],
  };

  it('updates the first element the query matched, scalars and documents alike', () => {
    expect(update(grades, { $set: { 'tags.$': 'B' } }, { filter: { tags: 'b' } })['tags']).toEqual(['a', 'B', 'c']);
    expect(update(grades, { $set: { 'grades.$.std': 6 } }, { filter: { 'grades.g': 85 } })['grades']).toEqual([
      { g: 80, std: 8 },
      { g: 85, std: 6 },
      { g: 85, std: 8 },
    ]);
    expect(update(grades, { $inc: { 'grades.$.g': 1 } }, { filter: { grades: { $elemMatch: { g: 85, std: 8 } } } })['grades']).toEqual([
      { g: 80, std: 8 },
      { g: 85, std: 5 },
      { g: 86, std: 8 },
    ]);
  });

  it('takes the first element every condition on the array matches, inside $and too', () => {
    const filter: ValueObject = { $and: [{ 'grades.g': 85 }, { 'grades.std': { $gt: 6 } }] };
    expect(update(grades, { $set: { 'grades.$.hit': true } }, { filter })['grades']).toEqual([
      { g: 80, std: 8 },
      { g: 85, std: 5 },
      { g: 85, std: 8, hit: true },
    ]);
  });

  it('matches under the query collation', () => {
    const collation = parseCollation({ locale: 'en', strength: 2 });
    expect(update(grades, { $set: { 'tags.$': 'x' } }, { filter: { tags: 'C' }, collation: collation! })['tags']).toEqual(['a', 'b', 'x']);
    expect(() => update(grades, { $set: { 'tags.$': 'x' } }, { filter: { tags: 'C' } })).toThrow(/did not find the match/);
  });

  it.each([
    ['no condition on the array', { $set: { 'tags.$': 0 } }, { _id: 1 }, /did not find the match needed from the query/],
    ['a condition on the whole array only', { $set: { 'tags.$': 0 } }, { tags: { $size: 3 } }, /did not find the match/],
    ['a $ that is not over an array', { $set: { '_id.$': 0 } }, { _id: 1 }, /did not find the match/],
    ['two $ in one path', { $set: { 'grades.$.x.$': 0 } }, { 'grades.g': 85 }, /Too many positional/],
    ['$ first in the path', { $set: { '$.x': 0 } }, {}, /in the first position/],
  ])('refuses %s', (_name, u, filter, message) => {
    const error = thrownBy(() => update(grades, u, { filter }));
    expect(error.code).toBe('BAD_VALUE');
    expect(error.message).toMatch(message);
  });

  it('refuses $ in the document an upsert inserts, which no query matched', () => {
    expect(thrownBy(() => upsertDocument({ tags: 'b' }, { $set: { 'tags.$': 'B' } }, { now })).message).toMatch(/did not find the match/);
  });
});
