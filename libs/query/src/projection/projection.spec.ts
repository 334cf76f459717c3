import { describe, expect, it } from 'vitest';
import { TesseraError, parseCollation } from '@tessera/core';
import type { ValueObject } from '@tessera/core';
import { compileProjection, projectionOptions } from './projection.js';

const doc: ValueObject = { _id: 1, a: 1, b: { c: 2, d: 3 }, e: [{ c: 1, d: 2 }, 5], f: 'x' };

describe('compileProjection', () => {
  it.each<[string, unknown, ValueObject]>([
    ['no projection returns the document', undefined, doc],
    ['an empty projection returns the document', {}, doc],
    ['inclusion keeps _id and the document order', { f: 1, a: 1 }, { _id: 1, a: 1, f: 'x' }],
    ['inclusion may exclude _id', { a: 1, _id: 0 }, { a: 1 }],
    ['inclusion of a nested path', { 'b.c': 1 }, { _id: 1, b: { c: 2 } }],
    ['inclusion through an array keeps documents only', { 'e.c': true }, { _id: 1, e: [{ c: 1 }] }],
    ['exclusion', { a: 0, f: false }, { _id: 1, b: { c: 2, d: 3 }, e: [{ c: 1, d: 2 }, 5] }],
    ['exclusion of a nested path and through an array', { 'b.d': 0, 'e.d': 0 }, { _id: 1, a: 1, b: { c: 2 }, e: [{ c: 1 }, 5], f: 'x' }],
    ['exclusion of _id alone', { _id: 0 }, { a: 1, b: { c: 2, d: 3 }, e: [{ c: 1, d: 2 }, 5], f: 'x' }],
  ])('%s', (_name, spec, expected) => {
    expect(compileProjection(spec)(doc)).toEqual(expected);
  });

  it.each<[string, unknown, RegExp]>([
    ['exclusion in an inclusion', { a: 1, b: 0 }, /Cannot do exclusion on field b in inclusion projection/],
    ['inclusion in an exclusion', { a: 0, b: 1 }, /Cannot do inclusion on field b in exclusion projection/],
    ['overlapping paths', { b: 1, 'b.c': 1 }, /Path collision at 'b\.c'/],
    ['a $slice limit that is not positive', { e: { $slice: [1, 0] } }, /\$slice limit must be positive/],
    ['$elemMatch on a nested field', { 'b.e': { $elemMatch: { c: 1 } } }, /nested field/],
    ['$elemMatch in an exclusion', { a: 0, e: { $elemMatch: { c: 1 } } }, /Cannot do inclusion on field e in exclusion projection/],
    ['a computed field in an exclusion', { a: 0, f: 'x' }, /Cannot do inclusion/],
    ['two positional projections', { 'e.$': 1, 'g.$': 1 }, /more than one positional/],
    ['a $ that is not last', { 'e.$.c': 1 }, /not valid/],
    ['a script', { f: { $function: { body: 'return 1', args: [], lang: 'js' } } }, /no server-side JavaScript/],
  ])('refuses %s', (_name, spec, message) => {
    expect(() => compileProjection(spec)).toThrow(TesseraError);
    expect(() => compileProjection(spec)).toThrow(message);
  });
});

describe('projection operators', () => {
  const grades: ValueObject = {
    _id: 1,
    name: 'Ann',
    scores: [1, 2, 3, 4, 5],
    grades: [
      { s: 70, t: 'x' },
      { s: 90, t: 'y' },
      { s: 95, t: 'y' },
    ],
  };

  it.each<[string, unknown, ValueObject]>([
    ['$slice alone keeps every other field', { scores: { $slice: 2 } }, { ...grades, scores: [1, 2] }],
    ['$slice from the end', { scores: { $slice: -2 } }, { ...grades, scores: [4, 5] }],
    ['$slice with skip and limit', { scores: { $slice: [-3, 2] } }, { ...grades, scores: [3, 4] }],
    ['$slice in an inclusion', { name: 1, scores: { $slice: [1, 2] } }, { _id: 1, name: 'Ann', scores: [2, 3] }],
    ['$slice in an exclusion', { grades: 0, scores: { $slice: 1 } }, { _id: 1, name: 'Ann', scores: [1] }],
    ['$elemMatch, the first match only', { grades: { $elemMatch: { t: 'y' } } }, { _id: 1, grades: [{ s: 90, t: 'y' }] }],
    ['$elemMatch matching nothing drops the field', { name: 1, grades: { $elemMatch: { s: { $gt: 99 } } } }, { _id: 1, name: 'Ann' }],
    [
      'computed fields read the document',
      { name: 1, best: { $max: '$grades.s' }, tag: 'literal' },
      { _id: 1, name: 'Ann', best: 95, tag: 'literal' },
    ],
  ])('%s', (_name, spec, expected) => {
    expect(compileProjection(spec)(grades)).toEqual(expected);
  });

  it("the positional $ takes the element the find's query matched, under its collation", () => {
    const options = projectionOptions({ 'grades.s': { $gte: 90 } }, undefined, undefined);
    expect(compileProjection({ 'grades.$': 1 }, options)(grades)).toEqual({ _id: 1, grades: [{ s: 90, t: 'y' }] });
    const collated = projectionOptions({ name: 'ann', 'grades.t': 'Y' }, parseCollation({ locale: 'en', strength: 2 }), undefined);
    expect(compileProjection({ name: 1, 'grades.$': 1 }, collated)(grades)).toEqual({ _id: 1, name: 'Ann', grades: [{ s: 90, t: 'y' }] });
    expect(() => compileProjection({ 'grades.$': 1 }, projectionOptions({ name: 'Ann' }, undefined, undefined))(grades)).toThrow(
      /couldn't find a matching element/,
    );
  });

  it('computed fields read let, and the input document is left alone', () => {
    const before = JSON.stringify(grades);
    const project = compileProjection({ scores: { $slice: 1 }, scaled: { $multiply: [2, '$$k'] } }, { variables: { k: 21 } });
    expect(project(grades)).toMatchObject({ scores: [1], scaled: 42 });
    expect(JSON.stringify(grades)).toBe(before);
  });
});
