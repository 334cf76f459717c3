import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import type { ValueObject } from '@tessera/core';
import { compileProjection } from './projection.js';

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
    ['an operator', { e: { $slice: 1 } }, /operators are not supported/],
    ['a positional path', { 'e.$': 1 }, /not supported/],
  ])('refuses %s', (_name, spec, message) => {
    expect(() => compileProjection(spec)).toThrow(TesseraError);
    expect(() => compileProjection(spec)).toThrow(message);
  });
});
