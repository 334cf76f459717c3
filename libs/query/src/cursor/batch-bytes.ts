/**
 * How large a batch of a cursor may grow: MongoDB ends a find's or getMore's batch before the
 * document that would take it past 16 MiB, and a batch always holds one document when any is
 * left, however large.
 */
import { calculateObjectSize } from 'bson';
import type { ValueObject } from '@tessera/core';

/** The most a batch of more than one document holds: 16 MiB of BSON, as MongoDB's. */
export const MAX_BATCH_BYTES = 16 * 1024 * 1024;

/** A document's size in BSON bytes. */
export function bsonSize(document: ValueObject): number {
  return calculateObjectSize(document as Record<string, unknown>);
}
