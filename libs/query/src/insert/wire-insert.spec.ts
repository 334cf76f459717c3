import fc from 'fast-check';
import { ObjectId } from 'bson';
import { describe, expect, it } from 'vitest';
import { type ValueObject, fromExtendedJsonObject, toExtendedJsonObject } from '@tessera/core';
import { MAX_DOCUMENT_SIZE, prepareInsert } from './prepare-insert.js';
import { prepareWireInsert } from './wire-insert.js';

const generated = new ObjectId('0102030405060708090a0b0c');
const options = { generateId: () => generated };

/** What the general path stores for a document as it came: its text and BSON size. */
function generalPath(json: Record<string, unknown>): { text: string; size: number; id: unknown } {
  const { document, size } = prepareInsert(fromExtendedJsonObject(json) as ValueObject, options);
  return { text: JSON.stringify(toExtendedJsonObject(document)), size, id: document['_id'] };
}

const hex = fc.stringMatching(/^[0-9a-fA-F]{24}$/);
const leaf = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  hex.map(($oid) => ({ $oid })),
  fc.constantFrom(-0, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 2 ** 53 + 2, 1.5, 'é', '😀', '\ud800', 'a\u0000b'),
);
const value = fc.oneof(leaf, fc.array(leaf, { maxLength: 12 }), fc.dictionary(fc.string({ maxLength: 4 }), leaf, { maxKeys: 3 }));
const fields = fc.dictionary(fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('k', 'é', '$x', '__proto__', 'a\u0000')), value, {
  maxKeys: 5,
});
/** Documents as the router sends them (`_id` first) and as users may write them (none, or later). */
const documents = fc.oneof(
  fields,
  fc.tuple(fc.oneof(value, hex.map(($oid) => ({ $oid }))), fields).map(([_id, rest]) => ({ _id, ...rest })),
  fc.tuple(value, fields).map(([_id, rest]) => ({ ...rest, _id })),
);

describe('prepareWireInsert', () => {
  it('stores what the general path stores, or leaves the document to it', () => {
    let taken = 0;
    let runs = 0;
    fc.assert(
      fc.property(documents, (json) => {
        runs++;
        const wire = prepareWireInsert(json, options);
        if (wire === undefined) return;
        taken++;
        const general = generalPath(json);
        expect(wire.text).toBe(general.text);
        expect(wire.size).toBe(general.size);
        expect(wire.id).toEqual(general.id);
        expect(wire.generated).toBe(!Object.hasOwn(json, '_id'));
      }),
      { numRuns: 2000 },
    );
    // The property must not hold by leaving everything to the general path (about 1 in 9 of
    // these documents, made to hit the edges, is taken; the router's documents all are).
    expect(taken).toBeGreaterThan(runs / 20);
  });

  it('takes the documents the router sends: plain JSON with an ObjectId _id first', () => {
    const json = { _id: { $oid: '0123456789abcdef01234567' }, k: 5, n: 2 ** 40, payload: 'x'.repeat(150), tags: ['a', { b: null }] };
    const wire = prepareWireInsert(json, options);
    expect(wire).toEqual({ ...generalPath(json), generated: false });
    expect(wire?.id).toEqual(new ObjectId('0123456789abcdef01234567'));
  });

  it('generates the _id first when the document has none', () => {
    expect(prepareWireInsert({ a: 1 }, options)).toEqual({ text: '{"_id":{"$oid":"0102030405060708090a0b0c"},"a":1}', size: 29, id: generated, generated: true });
    expect(prepareWireInsert({}, options)?.text).toBe('{"_id":{"$oid":"0102030405060708090a0b0c"}}');
  });

  it('leaves to the general path what it must convert, reorder or refuse', () => {
    for (const json of [
      { _id: 1, when: { $date: '2020-01-01T00:00:00Z' } },
      { _id: 1, n: { $numberLong: '5' } },
      { _id: { $oid: '0123456789ABCDEF01234567' } },
      { a: 1, _id: 1 },
      { _id: [1, 2] },
      { _id: 1, $set: 1 },
      { _id: 1, big: 'x'.repeat(MAX_DOCUMENT_SIZE) },
    ]) {
      expect(prepareWireInsert(json, options), JSON.stringify(json).slice(0, 80)).toBeUndefined();
    }
    expect(prepareWireInsert([1], options)).toBeUndefined();
    expect(prepareWireInsert('text', options)).toBeUndefined();
  });
});
