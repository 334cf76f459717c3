/**
 * Insert validation: what a document must be before a shard stores it. `_id` comes first and
 * is generated when missing (the generator is injected: no randomness here).
 */
import type { ObjectId } from 'bson';
import { TesseraError, typeBracketOf } from '@tessera/core';
import type { Value, ValueObject } from '@tessera/core';
import { bsonSize } from '../cursor/batch-bytes.js';
import { display, isDocument } from '../values.js';

/** MongoDB's maximum document size: 16 MiB of BSON. */
export const MAX_DOCUMENT_SIZE = 16 * 1024 * 1024;

/** Options of `prepareInsert`. */
export interface PrepareInsertOptions {
  /** Makes the `_id` of a document that has none (an ObjectId, as drivers and mongos do). */
  readonly generateId: () => ObjectId;
}

/** A document ready to store and its BSON size in bytes. */
export interface PreparedInsert {
  readonly document: ValueObject;
  readonly size: number;
}

/**
 * Returns the BSON size of a document in bytes. Throws `DOCUMENT_TOO_LARGE` (with the size and
 * the `_id`) when it exceeds 16 MiB.
 */
export function checkDocumentSize(document: ValueObject): number {
  const size = bsonSize(document);
  if (size > MAX_DOCUMENT_SIZE) {
    throw new TesseraError(
      'DOCUMENT_TOO_LARGE',
      `The document${Object.hasOwn(document, '_id') ? ` with _id ${display(document['_id'])}` : ''} is ${size} bytes of BSON, over the ${MAX_DOCUMENT_SIZE}-byte limit.`,
      {
        details: { size, limit: MAX_DOCUMENT_SIZE },
      },
    );
  }
  return size;
}

/**
 * The checks of `prepareInsert` that read only a document's `_id`, for a router that passes
 * documents on as they came and decodes no more than it needs: `id` is the decoded value of
 * `document._id` (ignored when the document has none). Field names may start with `$` at any
 * level, as MongoDB 5.0+ stores them, except inside `_id`. Throws `BAD_VALUE` for an array,
 * regex or undefined `_id` and `DOLLAR_PREFIXED_FIELD_NAME` for a `$`-prefixed name inside it,
 * with `index` in its details when given.
 */
export function checkInsertFields(document: Readonly<Record<string, unknown>>, id: Value | undefined, index?: number): void {
  if (!Object.hasOwn(document, '_id')) return;
  const type = id === undefined ? 'undefined' : typeBracketOf(id);
  if (type === 'array' || type === 'regex' || type === 'undefined') {
    throw new TesseraError(
      'BAD_VALUE',
      `The _id cannot be ${type === 'array' ? 'an array' : type === 'regex' ? 'a regular expression' : 'undefined'}, got ${display(id)}.`,
      {
        details: { field: '_id', index },
      },
    );
  }
  const dollar = dollarPrefixedName(id!, '_id');
  if (dollar !== undefined) {
    throw new TesseraError(
      'DOLLAR_PREFIXED_FIELD_NAME',
      `_id fields may not contain '$'-prefixed fields: ${dollar.name} is not valid for storage.`,
      {
        details: { field: dollar.path, index },
      },
    );
  }
}

/** The first `$`-prefixed field name inside `value`'s embedded documents and arrays, with its path. */
function dollarPrefixedName(value: Value, path: string): { name: string; path: string } | undefined {
  if (Array.isArray(value)) {
    for (const [i, element] of (value as Value[]).entries()) {
      const found = dollarPrefixedName(element, `${path}.${i}`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (!isDocument(value)) return undefined;
  for (const [name, field] of Object.entries(value)) {
    if (name.startsWith('$')) return { name, path: `${path}.${name}` };
    const found = dollarPrefixedName(field, `${path}.${name}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Validates an insert and returns the document with `_id` first (generated when missing) and
 * its size. `index` (the statement's index in its batch) goes in the errors' details when given:
 * messages do not name it, since a shard's batch index is not the user's (the router maps the
 * details' index back, and a write error carries the user's index beside its message).
 * Throws `BAD_VALUE` when the document is not a document or `_id` is an array, a regex or
 * undefined; `DOLLAR_PREFIXED_FIELD_NAME` for a `$`-prefixed name inside `_id`;
 * `DOCUMENT_TOO_LARGE` over 16 MiB.
 */
export function prepareInsert(document: unknown, options: PrepareInsertOptions, index?: number): PreparedInsert {
  if (!isDocument(document))
    throw new TesseraError('BAD_VALUE', `A document to insert must be a document, got ${display(document)}.`, {
      details: { index },
    });
  checkInsertFields(document, document['_id'], index);
  let prepared: ValueObject = document;
  if (Object.hasOwn(document, '_id')) {
    if (Object.keys(document)[0] !== '_id') {
      const { _id, ...rest } = document;
      prepared = { _id: _id as Value, ...rest };
    }
  } else {
    prepared = { _id: options.generateId(), ...document };
  }
  try {
    return { document: prepared, size: checkDocumentSize(prepared) };
  } catch (error) {
    if (error instanceof TesseraError && index !== undefined) {
      throw new TesseraError(error.code, error.message, { details: { ...error.details, index } });
    }
    throw error;
  }
}
