import { describe, expect, it } from 'vitest';
import { parseCollation, stringComparatorFor } from './collation.js';
import { compareValues, valuesEqual } from './compare-values.js';
import type { ValueObject } from './value.js';

const comparator = (spec: ValueObject) => stringComparatorFor(parseCollation(spec))!;

describe('collation', () => {
  it('compares base letters at strength 1, adds accents at 2 and case at 3 (the default)', () => {
    const s1 = comparator({ locale: 'en', strength: 1 });
    const s2 = comparator({ locale: 'en', strength: 2 });
    const s3 = comparator({ locale: 'en' });
    expect([s1('cafe', 'Café'), s1('a', 'b')]).toEqual([0, -1]);
    expect([s2('cafe', 'CAFE'), s2('cafe', 'café')]).toEqual([0, -1]);
    expect([s3('a', 'A'), s3('a', 'a')]).toEqual([-1, 0]);
    expect(comparator({ locale: 'en', strength: 1, caseLevel: true })('a', 'A')).not.toBe(0);
  });

  it('orders digits as numbers with numericOrdering, upper case first with caseFirst', () => {
    expect(comparator({ locale: 'en' })('10', '9')).toBe(-1);
    expect(comparator({ locale: 'en', numericOrdering: true })('10', '9')).toBe(1);
    expect(comparator({ locale: 'en', caseFirst: 'upper' })('A', 'a')).toBe(-1);
    expect(comparator({ locale: 'en', caseFirst: 'lower' })('A', 'a')).toBe(1);
  });

  it('applies to strings inside arrays and documents, never to field names or other types', () => {
    const s2 = comparator({ locale: 'en', strength: 2 });
    expect(valuesEqual(['Ab', { k: 'CD' }], ['ab', { k: 'cd' }], s2)).toBe(true);
    expect(valuesEqual({ K: 'x' }, { k: 'x' }, s2)).toBe(false);
    expect(compareValues(5, 'a', s2)).toBe(-1);
    expect(valuesEqual('Ab', 'ab')).toBe(false);
  });

  it('reads simple as byte order and refuses what MongoDB refuses, and what Intl cannot do', () => {
    expect(parseCollation(undefined)).toBeUndefined();
    expect(parseCollation({ locale: 'simple' })).toBeUndefined();
    expect(() => parseCollation({ locale: 'simple', strength: 1 })).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
    expect(() => parseCollation({ strength: 1 })).toThrow(expect.objectContaining({ code: 'FAILED_TO_PARSE' }));
    expect(() => parseCollation({ locale: 'en', colour: 1 })).toThrow(expect.objectContaining({ code: 'FAILED_TO_PARSE' }));
    expect(() => parseCollation({ locale: 'en', strength: 6 })).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
    expect(() => parseCollation({ locale: 'en', caseFirst: 'middle' })).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
    expect(() => parseCollation({ locale: 'not a locale!' })).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
    expect(() => parseCollation({ locale: 'fr', backwards: true })).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
  });
});
