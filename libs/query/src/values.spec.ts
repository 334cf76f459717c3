import { describe, expect, it } from 'vitest';
import { parseCollation } from '@tessera/core';
import { distinctValues } from './values.js';

describe('distinctValues', () => {
  it("answers each value once in MongoDB's order, numbers of any type equal", () => {
    expect(distinctValues(['b', 2, 'a', 2.0, null, 'b', { x: 1 }, 1])).toEqual([null, 1, 2, 'a', 'b', { x: 1 }]);
  });

  it('keeps, of the strings a collation calls equal, the least by bytes, whatever order they came in', () => {
    const collation = parseCollation({ locale: 'en', strength: 2 });
    expect(distinctValues(['ann', 'Bob', 'Ann', 'bob', 'ANN'], collation)).toEqual(['ANN', 'Bob']);
    expect(distinctValues(['ANN', 'ann', 'bob', 'Ann', 'Bob'], collation)).toEqual(['ANN', 'Bob']);
  });
});
