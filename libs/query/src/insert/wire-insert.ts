/**
 * The shard's common insert without decoding the document. A document that came as plain JSON,
 * whose only Extended JSON is the `{"$oid": ...}` of ObjectIds (what drivers send and what the
 * router's generated `_id`s are), is stored as the text it came as: decoding it and printing it
 * back as relaxed Extended JSON gives that same text. One walk over it checks that and counts
 * its BSON size, where the general path copies it twice and prints it once.
 */
import { type Value, fromExtendedJsonObject } from '@tessera/core';
import { MAX_DOCUMENT_SIZE, type PrepareInsertOptions } from './prepare-insert.js';

/** A document prepared by `prepareWireInsert`. */
export interface PreparedWireInsert {
  /** What `prepareInsert` then relaxed Extended JSON print: the document as it came, `_id` first. */
  readonly text: string;
  /** The decoded document's BSON size, as `prepareInsert` counts it. */
  readonly size: number;
  /** The `_id`, decoded; a generated one when the document had none. */
  readonly id: Value;
  /** True when `id` was generated here, so the document as it came lacks it. */
  readonly generated: boolean;
}

/** A walk's answer for a value it cannot vouch for: the general path must take the document. */
const NOT_PLAIN = -1;
const OBJECT_ID_HEX = /^[0-9a-f]{24}$/;
const ARRAY_INDEX = /^(?:0|[1-9][0-9]*)$/;
const DOLLAR = 0x24;
const INT32_MIN = -2_147_483_648;
const INT32_MAX = 2_147_483_647;

/**
 * Prepares a document as it came on the wire (parsed JSON) for storage, or answers undefined
 * when the general path (`fromExtendedJsonObject`, `prepareInsert`, `toExtendedJsonObject`) must
 * take it: any `$` field name other than an ObjectId's `$oid` (including the top-level names
 * `prepareInsert` refuses), an ObjectId in upper-case hex, an `_id` that is not the first field
 * or is an array, a document without `_id` whose first field name is an array index, a value
 * JSON cannot hold, a field named `__proto__` or holding a NUL byte, or a size over the limit.
 * Answers what the general path would give for every other document (property-tested against
 * it). Throws nothing: what it cannot vouch for, it leaves.
 */
export function prepareWireInsert(json: unknown, options: PrepareInsertOptions): PreparedWireInsert | undefined {
  if (!isPlainObject(json)) return undefined;
  const fields = Object.keys(json);
  let size = 5;
  for (let i = 0; i < fields.length; i++) {
    const name = fields[i]!;
    if (name.charCodeAt(0) === DOLLAR) return undefined;
    if (name === '_id' && (i !== 0 || Array.isArray(json[name]))) return undefined;
    const element = elementSize(name, json[name]);
    if (element === NOT_PLAIN) return undefined;
    size += element;
  }
  if (fields[0] === '_id') {
    if (size > MAX_DOCUMENT_SIZE) return undefined;
    return { text: JSON.stringify(json), size, id: fromExtendedJsonObject(json['_id']), generated: false };
  }
  // JavaScript objects list integer-like names (array indexes) first, so the general path's
  // `{ _id, ...document }` puts such fields before the generated `_id`: leave those to it.
  if (fields.length > 0 && ARRAY_INDEX.test(fields[0]!)) return undefined;
  size += 2 + 3 + 12;
  if (size > MAX_DOCUMENT_SIZE) return undefined;
  const id = options.generateId();
  const idText = `{"_id":{"$oid":"${id.toHexString()}"}`;
  return { text: fields.length === 0 ? `${idText}}` : `${idText},${JSON.stringify(json).slice(1)}`, size, id, generated: true };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** The BSON size of one element (type byte, name, value) of the decoded document, or NOT_PLAIN. */
function elementSize(name: string, value: unknown): number {
  if (name === '__proto__' || name.includes('\0')) return NOT_PLAIN;
  const head = 2 + utf8Length(name);
  switch (typeof value) {
    case 'string':
      return head + 5 + utf8Length(value);
    case 'boolean':
      return head + 1;
    case 'number':
      // As bson counts the decoded number: an int32 when it is one (-0 decodes as 0), else a double.
      if (!Number.isFinite(value)) return NOT_PLAIN;
      return head + (Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX ? 4 : 8);
    case 'object': {
      if (value === null) return head;
      if (Array.isArray(value)) {
        let size = 5;
        for (let i = 0; i < value.length; i++) {
          const element = elementSize(String(i), value[i]);
          if (element === NOT_PLAIN) return NOT_PLAIN;
          size += element;
        }
        return head + size;
      }
      if (!isPlainObject(value)) return NOT_PLAIN;
      const fields = Object.keys(value);
      if (fields.length === 1 && fields[0] === '$oid') {
        const hex = value['$oid'];
        return typeof hex === 'string' && OBJECT_ID_HEX.test(hex) ? head + 12 : NOT_PLAIN;
      }
      let size = 5;
      for (const field of fields) {
        if (field.charCodeAt(0) === DOLLAR) return NOT_PLAIN;
        const element = elementSize(field, value[field]);
        if (element === NOT_PLAIN) return NOT_PLAIN;
        size += element;
      }
      return head + size;
    }
    default:
      return NOT_PLAIN;
  }
}

/** UTF-8 length of a string as `Buffer.byteLength` counts it (a lone surrogate is U+FFFD, 3 bytes). */
function utf8Length(text: string): number {
  let length = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    if (unit < 0x800) {
      length += 1;
      continue;
    }
    length += 2;
    // A surrogate pair is 2 units and 4 bytes: its second unit adds nothing more.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
  }
  return length;
}
