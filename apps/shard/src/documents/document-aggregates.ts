import type { DataSource } from 'typeorm';
import { type Value, type ValueObject, toExtendedJsonObject, typeBracketOf } from '@tessera/core';
import { poolQueryable } from '@tessera/platform';
import { distinctValues } from '@tessera/query';
import { type ReadOptions, compileScanFilter, scanMatching } from './document-scan.js';
import type { CollectionHandle } from './document-store.js';

/** count and distinct over the owned documents that match a filter (orphans never count). */
export class DocumentAggregates {
  constructor(private readonly dataSource: DataSource) {}

  /** How many owned documents match, after `skip` and capped by `limit` (0 = no cap), under `read`'s collation and time limit. */
  async count(handle: CollectionHandle, filter: ValueObject, skip = 0, limit = 0, read: ReadOptions = {}): Promise<number> {
    const matches = await scanMatching(
      handle.transaction?.manager ?? poolQueryable(this.dataSource, read.timeLimit),
      handle,
      compileScanFilter(filter, read.collation),
    );
    const afterSkip = Math.max(0, matches.length - skip);
    return limit > 0 ? Math.min(afterSkip, limit) : afterSkip;
  }

  /**
   * The distinct values of `key` (a dotted path) among matching documents, as MongoDB: an array
   * value contributes its elements, missing fields contribute nothing; in MongoDB's value order.
   * Under a collation, strings it calls equal count once (see `distinctValues`).
   */
  async distinct(handle: CollectionHandle, key: string, filter: ValueObject, read: ReadOptions = {}): Promise<unknown[]> {
    const matches = await scanMatching(
      handle.transaction?.manager ?? poolQueryable(this.dataSource, read.timeLimit),
      handle,
      compileScanFilter(filter, read.collation),
    );
    const segments = key.split('.');
    const values = matches.flatMap(({ document }) => valuesAtPath(document, segments));
    return distinctValues(values, read.collation).map((v) => toExtendedJsonObject(v));
  }
}

/**
 * The values a dotted path reaches, as MongoDB's distinct walks it: through arrays of embedded
 * documents element by element, and an array at the end contributes its elements.
 */
function valuesAtPath(value: Value, segments: readonly string[]): Value[] {
  if (Array.isArray(value))
    return (value as Value[]).flatMap((element) => (segments.length === 0 ? [element] : valuesAtPath(element, segments)));
  if (segments.length === 0) return [value];
  if (value === null || typeof value !== 'object' || typeBracketOf(value) !== 'object') return [];
  const next = (value as ValueObject)[segments[0]!];
  return next === undefined ? [] : valuesAtPath(next, segments.slice(1));
}
