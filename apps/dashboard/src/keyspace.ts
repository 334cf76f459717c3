/** A chunk as the key-space view keeps it: its bounds' Extended JSON, with their text as keys. */
export interface ChunkView {
  min: unknown;
  max: unknown;
  /** JSON text of min and max: how chunks are matched across the query and the event stream. */
  minKey: string;
  maxKey: string;
  shard: string;
  version: string;
  jumbo: boolean;
  estimatedSizeBytes: number | null;
  /** When the page last saw it change (ms, the page's clock), for the highlight. */
  changedAt: number;
}

export interface ChunkFields {
  min: unknown;
  max: unknown;
  shard: string;
  version: string;
  jumbo?: boolean | null;
  estimatedSizeBytes?: number | null;
}

export function chunkView(chunk: ChunkFields, changedAt = 0): ChunkView {
  return {
    min: chunk.min,
    max: chunk.max,
    minKey: JSON.stringify(chunk.min),
    maxKey: JSON.stringify(chunk.max),
    shard: chunk.shard,
    version: chunk.version,
    jumbo: chunk.jumbo === true,
    estimatedSizeBytes: chunk.estimatedSizeBytes ?? null,
    changedAt,
  };
}

/**
 * Applies one placement change to `chunks` (in key order, edited in place): the `before` chunks
 * leave, the `after` chunks take their places (a chunk keeps its place when its min is kept, a new
 * one goes right after the chunk that ends where it begins). Answers false, changing nothing,
 * when `before` does not match what the page holds: the page missed something and must reload.
 * A change the page already holds (read after it committed) is a no-op answering true. A size
 * estimate the event does not carry is kept from the chunk it replaces when the range is the same.
 */
export function applyPlacement(chunks: ChunkView[], before: ChunkFields[], after: ChunkFields[], at: number): boolean {
  const incoming = after.map((c) => chunkView(c, at));
  const held = (c: ChunkView) =>
    chunks.some((h) => h.minKey === c.minKey && h.maxKey === c.maxKey && h.version === c.version && h.shard === c.shard);
  if (incoming.length > 0 && incoming.every(held)) return true;
  const positions = before.map((b) => {
    const key = JSON.stringify(b.min);
    return chunks.findIndex((c) => c.minKey === key);
  });
  if (positions.some((p, i) => p < 0 || chunks[p]!.version !== before[i]!.version)) return false;
  const kept = new Set(incoming.map((c) => c.minKey));
  const leaving = positions.filter((p) => !kept.has(chunks[p]!.minKey)).sort((a, b) => b - a);
  for (const p of leaving) chunks.splice(p, 1);
  for (const chunk of incoming) {
    const at = chunks.findIndex((c) => c.minKey === chunk.minKey);
    if (at >= 0) {
      const old = chunks[at]!;
      if (chunk.estimatedSizeBytes === null && old.maxKey === chunk.maxKey) chunk.estimatedSizeBytes = old.estimatedSizeBytes;
      chunks[at] = chunk;
      continue;
    }
    const previous = chunks.findIndex((c) => c.maxKey === chunk.minKey);
    if (previous < 0 && chunks.length > 0 && !isGlobalMin(chunk.min)) return false;
    chunks.splice(previous + 1, 0, chunk);
  }
  return true;
}

/** True for a bound whose every field is MinKey: the first chunk of a collection. */
function isGlobalMin(bound: unknown): boolean {
  const values = Array.isArray(bound) ? bound : bound !== null && typeof bound === 'object' ? Object.values(bound) : [];
  return values.length > 0 && values.every((v) => typeof v === 'object' && v !== null && '$minKey' in v);
}

/** The chunks each pixel column of a band `width` wide stands for: [first, end). */
export function columnSpan(column: number, count: number, width: number): [number, number] {
  const first = Math.floor((column * count) / width);
  const end = Math.max(first + 1, Math.floor(((column + 1) * count) / width));
  return [Math.min(first, count), Math.min(end, count)];
}

/** The chunk under pixel column `x` of a band `width` wide, or -1 when there is none. */
export function chunkAtColumn(x: number, count: number, width: number): number {
  if (count === 0 || x < 0 || x >= width) return -1;
  return Math.min(count - 1, Math.floor(((x + 0.5) * count) / width));
}

export interface BandLayout {
  width: number;
  shards: string[];
  /** counts[x * shards.length + s]: chunks of shard s in column x. */
  counts: Uint32Array;
  jumbo: Uint8Array;
  /** The latest changedAt in each column. */
  changedAt: Float64Array;
}

/**
 * One pass over the chunks (O(chunks + width × shards)), so a band of 100,000 chunks is laid out
 * in time proportional to the data, whatever the number of pixels: each column counts the chunks
 * it covers per shard, whether one is jumbo and when one last changed.
 */
export function layoutBand(chunks: readonly ChunkView[], width: number, shards: readonly string[]): BandLayout {
  const index = new Map(shards.map((s, i) => [s, i]));
  const names = [...shards];
  for (const c of chunks) if (!index.has(c.shard)) index.set(c.shard, names.push(c.shard) - 1);
  const counts = new Uint32Array(width * names.length);
  const jumbo = new Uint8Array(width);
  const changedAt = new Float64Array(width);
  const n = chunks.length;
  for (let x = 0; x < width && n > 0; x++) {
    const [first, end] = columnSpan(x, n, width);
    for (let i = first; i < end; i++) {
      const c = chunks[i]!;
      counts[x * names.length + index.get(c.shard)!]! += 1;
      if (c.jumbo) jumbo[x] = 1;
      if (c.changedAt > changedAt[x]!) changedAt[x] = c.changedAt;
    }
  }
  return { width, shards: names, counts, jumbo, changedAt };
}

/**
 * Where a zone range sits on the band, as chunk indexes [first, end): from the chunk starting at
 * its min to the chunk ending at its max. Zone bounds are chunk bounds (the balancer splits at
 * them), so a range not found is one the page's chunks do not reach yet: null.
 */
export function zoneSpan(chunks: readonly ChunkView[], min: unknown, max: unknown): [number, number] | null {
  const minKey = JSON.stringify(min);
  const maxKey = JSON.stringify(max);
  const first = chunks.findIndex((c) => c.minKey === minKey);
  if (first < 0) return null;
  for (let i = first; i < chunks.length; i++) if (chunks[i]!.maxKey === maxKey) return [first, i + 1];
  return null;
}
