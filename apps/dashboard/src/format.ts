const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  let value = n;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value >= 100 || unit === 0 ? Math.round(value) : value.toFixed(1)} ${UNITS[unit]}`;
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

export function age(iso: string | null | undefined, now = Date.now()): string {
  return iso ? `${duration(Math.max(0, now - Date.parse(iso)))} ago` : '—';
}

export function count(n: number | null | undefined): string {
  return n === null || n === undefined ? '—' : n.toLocaleString('en-US');
}

/** A shard key bound (Extended JSON values in key order) as people read it: MinKey, 42, "a". */
export function bound(value: unknown): string {
  const values = Array.isArray(value) ? value : [value];
  return values.map(readable).join(', ');
}

function readable(value: unknown): string {
  if (value !== null && typeof value === 'object') {
    const v = value as Record<string, unknown>;
    if ('$minKey' in v) return 'MinKey';
    if ('$maxKey' in v) return 'MaxKey';
    for (const tag of ['$numberInt', '$numberLong', '$numberDouble', '$numberDecimal']) if (tag in v) return String(v[tag]);
    if ('$oid' in v) return `ObjectId(${String(v.$oid)})`;
  }
  return JSON.stringify(value);
}

/** Bytes per second from samples [ms, bytes], over the last `windowMs`; null with fewer than two. */
export function rate(samples: ReadonlyArray<readonly [number, number]>, windowMs = 10_000): number | null {
  const last = samples[samples.length - 1];
  if (last === undefined) return null;
  const first = samples.find(([t]) => t >= last[0] - windowMs);
  if (first === undefined || first === last || last[0] === first[0]) return null;
  return ((last[1] - first[1]) * 1_000) / (last[0] - first[0]);
}

/** Time left to clone `total` bytes at `perSecond`, or null when either is unknown or nothing moves. */
export function eta(done: number | null, total: number | null, perSecond: number | null): number | null {
  if (done === null || total === null || perSecond === null || perSecond <= 0) return null;
  return (Math.max(0, total - done) / perSecond) * 1_000;
}

/** Okabe-Ito colours, distinguishable with colour-blindness, for shards in name order. */
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#555555'];

export function shardColor(shards: readonly string[], shard: string): string {
  const i = shards.indexOf(shard);
  return PALETTE[(i < 0 ? shards.length : i) % PALETTE.length]!;
}
