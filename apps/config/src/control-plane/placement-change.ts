import type { ClusterEvent } from '@tessera/protocol';
import type { ChunkType, PlacementChangeType } from './graphql-types.js';

/**
 * A chunk as the changelog describes it (`describeChunk`): range, shard, version `major|minor`,
 * and the size estimate its catalog row had when the commit wrote the event, if any.
 */
interface DescribedChunk {
  range: { min: unknown; max: unknown };
  shard: string;
  version: string;
  estimatedSizeBytes?: unknown;
  estimatedDocuments?: unknown;
}

/**
 * The chunks before and after a placement event, read from its changelog details: a split
 * (one chunk before, its pieces after), a merge (the run before, one chunk after), a migration
 * commit (the moved chunk and the donor's control chunk, before and after), a jumbo flag change
 * (the chunk after). Other placement events (DDL, zone ranges) carry no chunk lists.
 *
 * Sizes are the estimates the commit found in the catalog, kept in the event so that a client
 * reading it later sees the sizes of that moment: a moved chunk and a control chunk keep theirs,
 * a merged chunk has the sum of its parts' when all had one, a split's pieces have none (only
 * the shard can tell how the bytes fall on either side of a split point; it reports each piece
 * when it next measures it). Events written before the commits recorded estimates have none.
 */
export function placementChangeOf(event: ClusterEvent): PlacementChangeType {
  const d = event.details;
  let before: unknown[] = [];
  let after: unknown[] = [];
  switch (event.kind) {
    case 'split':
    case 'multi-split':
      before = [d.before];
      after = asList(d.after);
      break;
    case 'merge':
      before = asList(d.before);
      after = [d.merged];
      break;
    case 'moveChunk.commit':
      before = asList(d.before);
      after = [d.chunk, d.controlChunk];
      break;
    case 'markJumbo':
    case 'clearJumboFlag':
      after = [d.chunk];
      break;
    default:
      break;
  }
  return {
    seq: event.seq,
    time: event.time,
    ns: event.ns,
    reason: event.kind,
    before: chunksOf(before, event.kind === 'markJumbo'),
    after: chunksOf(after, event.kind === 'markJumbo'),
    event,
  };
}

function asList(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function chunksOf(values: unknown[], jumbo: boolean): ChunkType[] {
  return values.filter(isDescribedChunk).map((c) => ({
    min: c.range.min,
    max: c.range.max,
    shard: c.shard,
    version: c.version,
    jumbo: jumbo ? true : null,
    estimatedSizeBytes: numberOrNull(c.estimatedSizeBytes),
    estimatedDocuments: numberOrNull(c.estimatedDocuments),
    history: null,
  }));
}

function isDescribedChunk(value: unknown): value is DescribedChunk {
  const v = value as DescribedChunk | null | undefined;
  return typeof v === 'object' && v !== null && typeof v.shard === 'string' && typeof v.version === 'string' && typeof v.range === 'object';
}

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' ? value : null;
}
