import { ObjectId } from 'bson';
import { describe, expect, it } from 'vitest';
import { thrownBy } from '../../../../test/errors.js';
import { MAX_DOCUMENT_SIZE, prepareInsert } from './prepare-insert.js';

const generated = new ObjectId('0102030405060708090a0b0c');
const options = { generateId: () => generated };

describe('prepareInsert', () => {
  it('adds a generated _id first when missing and returns the BSON size', () => {
    const { document, size } = prepareInsert({ a: 1 }, options);
    expect(Object.keys(document)).toEqual(['_id', 'a']);
    expect(document['_id']).toBe(generated);
    expect(size).toBe(29);
  });

  it('moves an existing _id first and keeps its value', () => {
    expect(Object.keys(prepareInsert({ a: 1, _id: 'k' }, options).document)).toEqual(['_id', 'a']);
  });

  it.each<[string, unknown, string, RegExp]>([
    [
      'a $-prefixed name inside _id',
      { _id: { a: 1, b: [{ $c: 1 }] } },
      'DOLLAR_PREFIXED_FIELD_NAME',
      /^_id fields may not contain '\$'-prefixed fields: \$c is not valid for storage\.$/,
    ],
    ['an array _id', { _id: [1] }, 'BAD_VALUE', /^The _id cannot be an array/],
    ['a regex _id', { _id: /x/ }, 'BAD_VALUE', /cannot be a regular expression/],
    ['not a document', 'text', 'BAD_VALUE', /must be a document, got/],
    ['a document over 16 MiB', { s: 'x'.repeat(MAX_DOCUMENT_SIZE) }, 'DOCUMENT_TOO_LARGE', /over the 16777216-byte limit/],
  ])('refuses %s, with the statement index in its details', (_name, doc, code, message) => {
    const error = thrownBy(() => prepareInsert(doc, options, 3));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
    expect(error.details).toMatchObject({ index: 3 });
  });

  it('stores $-prefixed names at the top level and below, as MongoDB 5.0+ does, even operator names', () => {
    expect(prepareInsert({ a: { $b: 1 } }, options).document).toEqual({ _id: generated, a: { $b: 1 } });
    expect(prepareInsert({ $price: 50, $inc: true, location: { $db: 'n' } }, options).document).toEqual({
      _id: generated,
      $price: 50,
      $inc: true,
      location: { $db: 'n' },
    });
  });
});
