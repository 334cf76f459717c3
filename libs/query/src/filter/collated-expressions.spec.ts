import { describe, expect, it } from 'vitest';
import { parseCollation } from '@tessera/core';
import { runPipeline } from '../aggregate/run-pipeline.js';
import { parseFilter } from './parse-filter.js';

const caseless = parseCollation({ locale: 'en', strength: 2 })!;
const numeric = parseCollation({ locale: 'en', numericOrdering: true })!;

describe('comparison expressions under a collation', () => {
  it("compare strings by the collation in a filter's $expr", () => {
    const equal = { $expr: { $eq: ['$name', 'ANN'] } };
    expect(parseFilter(equal, caseless).matches({ name: 'ann' })).toBe(true);
    expect(parseFilter(equal).matches({ name: 'ann' })).toBe(false);
    const below = { $expr: { $lt: ['$code', 'item10'] } };
    expect(parseFilter(below, numeric).matches({ code: 'item9' })).toBe(true);
    expect(parseFilter(below).matches({ code: 'item9' })).toBe(false);
    expect(parseFilter({ $expr: { $ne: ['$name', 'Ann'] } }, caseless).matches({ name: 'aNN' })).toBe(false);
  });

  it("compare by the collation in a pipeline's expressions, and as mingo does without one or with a missing operand", () => {
    const pipeline = [
      { $project: { _id: 0, same: { $eq: ['$name', 'ANN'] }, order: { $cmp: ['$name', 'b'] }, none: { $eq: ['$nothing', null] } } },
    ];
    expect(runPipeline([{ _id: 1, name: 'ann' }], pipeline, { collation: caseless })).toEqual([{ same: true, order: -1, none: true }]);
    expect(runPipeline([{ _id: 1, name: 'ann' }], pipeline)).toEqual([{ same: false, order: -1, none: true }]);
  });
});
