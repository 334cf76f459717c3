import { describe, expect, it } from 'vitest';
import { thrownBy } from '../../../../test/errors.js';
import { applyUpdate } from './apply-update.js';
import { upsertDocument } from './upsert.js';

const now = new Date('2026-11-26T12:00:00Z');
const update = (doc: Record<string, unknown>, u: Record<string, unknown>, arrayFilters?: unknown[]) =>
  applyUpdate(doc as never, u, { now, ...(arrayFilters ? { arrayFilters } : {}) }).doc;

describe('array update operators ($[] and $[<identifier>] with arrayFilters)', () => {
  it('updates every element with $[], and the elements a filter matches with $[x], scalars and documents alike', () => {
    expect(update({ _id: 1, a: [1, 2, 3] }, { $inc: { 'a.$[]': 10 } })).toEqual({ _id: 1, a: [11, 12, 13] });
    expect(update({ _id: 1, a: [100, 20, 300] }, { $set: { 'a.$[big]': 0 } }, [{ big: { $gte: 100 } }])).toEqual({ _id: 1, a: [0, 20, 0] });
    const grades = {
      _id: 1,
      grades: [
        { g: 80, m: 1 },
        { g: 90, m: 2 },
        { g: 95, m: 3 },
      ],
    };
    expect(update(grades, { $set: { 'grades.$[e].top': true } }, [{ 'e.g': { $gte: 90 } }])).toEqual({
      _id: 1,
      grades: [
        { g: 80, m: 1 },
        { g: 90, m: 2, top: true },
        { g: 95, m: 3, top: true },
      ],
    });
  });

  it('nests positional operators, each with its own filter, and leaves a document alone when nothing matches', () => {
    const doc = { _id: 1, rows: [{ cells: [1, 5, 9] }, { cells: [7] }] };
    expect(update(doc, { $mul: { 'rows.$[].cells.$[c]': 2 } }, [{ c: { $gt: 4 } }])).toEqual({
      _id: 1,
      rows: [{ cells: [1, 10, 18] }, { cells: [14] }],
    });
    expect(applyUpdate(doc as never, { $set: { 'rows.$[r].x': 1 } }, { now, arrayFilters: [{ 'r.cells': { $size: 5 } }] }).modified).toBe(
      false,
    );
  });

  it.each<[string, Record<string, unknown>, Record<string, unknown>, unknown[] | undefined, string, RegExp]>([
    [
      'an identifier with no filter',
      { _id: 1, a: [1] },
      { $set: { 'a.$[x]': 0 } },
      undefined,
      'BAD_VALUE',
      /No array filter found for identifier 'x'/,
    ],
    ['a filter no path uses', { _id: 1, a: [1] }, { $set: { 'a.$[]': 0 } }, [{ y: 1 }], 'FAILED_TO_PARSE', /identifier 'y' was not used/],
    [
      'two filters for one identifier',
      { _id: 1, a: [1] },
      { $set: { 'a.$[x]': 0 } },
      [{ x: 1 }, { x: 2 }],
      'FAILED_TO_PARSE',
      /multiple array filters/,
    ],
    [
      'a filter over two identifiers',
      { _id: 1, a: [1] },
      { $set: { 'a.$[x]': 0 } },
      [{ x: 1, y: 2 }],
      'FAILED_TO_PARSE',
      /single top-level field/,
    ],
    [
      'an identifier not starting with a lowercase letter',
      { _id: 1, a: [1] },
      { $set: { 'a.$[X]': 0 } },
      [{ X: 1 }],
      'BAD_VALUE',
      /beginning with a lowercase letter/,
    ],
    [
      'a positional path over a field that is not an array',
      { _id: 1, a: 5 },
      { $set: { 'a.$[]': 0 } },
      undefined,
      'BAD_VALUE',
      /path 'a' must exist in the document in order to apply array updates/,
    ],
    [
      'arrayFilters with a replacement',
      { _id: 1, a: [1] },
      { a: [2] },
      [{ x: 1 }],
      'FAILED_TO_PARSE',
      /only be given with an update of operators/,
    ],
  ])('refuses %s', (_name, doc, u, filters, code, message) => {
    const error = thrownBy(() => update(doc, u, filters));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('applies to the document an upsert inserts', () => {
    expect(upsertDocument({ _id: 3, a: [1, 2] }, { $inc: { 'a.$[one]': 5 } }, { now, arrayFilters: [{ one: 1 }] })).toEqual({
      _id: 3,
      a: [6, 2],
    });
  });
});
