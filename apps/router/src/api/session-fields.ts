import { Binary } from 'bson';
import { z } from 'zod';
import { TesseraError } from '@tessera/core';
import type { Lsid } from '@tessera/protocol';
import { fromWire } from './extended-json.js';

/**
 * A command's session fields as MongoDB's drivers send them: `lsid: { id: <UUID> }` (Extended
 * JSON `{ "$uuid": "..." }`, or canonical `$binary` of subtype 4) and `txnNumber` (an int64:
 * a number or `{ "$numberLong": "..." }`). The schemas check the shape; `sessionOf` reads them.
 */
export const lsidBodySchema = z
  .strictObject({
    id: z.unknown().meta({ description: 'The session id, a UUID: `{ "$uuid": "..." }`.' }),
  })
  .meta({ description: 'The logical session of the command (MongoDB `lsid`).' });

export const txnNumberBodySchema = z
  .union([z.number().int().min(0), z.strictObject({ $numberLong: z.string().regex(/^\d{1,19}$/) })])
  .meta({ description: 'With `lsid`, makes a write retryable: sent again with the same pair, it runs once (MongoDB `txnNumber`).' });

/** The body of endSessions, refreshSessions and killSessions: the sessions, as `lsid`s. */
export const sessionListBodySchema = z.strictObject({
  ids: z.array(lsidBodySchema).min(1).max(10_000).meta({ description: 'The sessions, each `{ id: { "$uuid": "..." } }`.' }),
});

/** The session ids of a session list. Throws `BAD_VALUE` for an id that is not a UUID. */
export function sessionIdsOf(body: { ids: ReadonlyArray<{ id?: unknown }> }): string[] {
  return body.ids.map((lsid) => uuidOf(lsid.id));
}

export interface SessionFieldsBody {
  lsid?: { id?: unknown } | undefined;
  txnNumber?: number | { $numberLong: string } | undefined;
}

/** A command's session: its id, and its txnNumber when the command is a retryable write. */
export interface CommandSession {
  lsid: Lsid;
  txnNumber?: number;
  /**
   * The stmtId of the command's first statement (0 but for the parts of a bulkWrite, whose
   * statements are numbered across the whole command, so that a retry names the same ones).
   */
  stmtIdBase?: number;
}

/**
 * The session a command names, or undefined without one. Throws `BAD_VALUE` for an id that is
 * not a UUID or a txnNumber beyond 2^53, and `INVALID_OPTIONS` for a txnNumber without a session.
 */
export function sessionOf(body: SessionFieldsBody): CommandSession | undefined {
  if (body.lsid === undefined) {
    if (body.txnNumber !== undefined) throw new TesseraError('INVALID_OPTIONS', 'txnNumber may only be given with an lsid (a session)');
    return undefined;
  }
  const lsid = { id: uuidOf(body.lsid.id) };
  return body.txnNumber === undefined ? { lsid } : { lsid, txnNumber: txnNumberOf(body.txnNumber) };
}

/** The UUID an `lsid.id` holds (`{ "$uuid": ... }` or `$binary` of subtype 4), hyphenated; undefined when it holds none. */
export function sessionUuidOf(id: unknown): string | undefined {
  let value: unknown;
  try {
    value = id === undefined ? undefined : fromWire(id);
  } catch {
    return undefined;
  }
  return value instanceof Binary && value.sub_type === Binary.SUBTYPE_UUID && value.position === 16
    ? value.toUUID().toHexString(true)
    : undefined;
}

function uuidOf(id: unknown): string {
  const uuid = sessionUuidOf(id);
  if (uuid !== undefined) return uuid;
  throw new TesseraError('BAD_VALUE', 'lsid.id must be a UUID, e.g. { "$uuid": "0e8a3d9c-1a7b-4c1e-9a53-0d6f2e9b8a10" }', {
    details: { field: 'lsid.id' },
  });
}

function txnNumberOf(txnNumber: number | { $numberLong: string }): number {
  const value = typeof txnNumber === 'number' ? txnNumber : Number(txnNumber.$numberLong);
  if (!Number.isSafeInteger(value)) {
    throw new TesseraError('BAD_VALUE', `txnNumber ${String(value)} is beyond what Tessera keeps exactly (2^53 - 1)`, {
      details: { field: 'txnNumber' },
    });
  }
  return value;
}
