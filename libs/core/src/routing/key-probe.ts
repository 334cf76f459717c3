/**
 * Searching sorted encoded keys fast. Each stored key (a binary string: one char per byte)
 * carries its first 12 bytes as two 48-bit numbers, `hi` and `lo`, kept in flat
 * `Float64Array`s; a search compares `hi` numbers, reads `lo` only on a tie and a key string
 * only when both tie. Numbers in one
 * contiguous array cost far fewer cache misses than a million scattered strings, and a probe
 * built straight from encoded bytes allocates no string at all.
 */

/** A key to search for: its encoded bytes `bytes[0, length)` and their two prefix numbers. */
export interface KeyProbe {
  readonly bytes: Uint8Array;
  readonly length: number;
  readonly hi: number;
  readonly lo: number;
}

/** Sorted keys with their prefix numbers: key i has `hi[i]` and `lo[i]`. */
export interface SearchableKeys {
  readonly keys: readonly string[];
  readonly hi: Float64Array;
  readonly lo: Float64Array;
}

/** Returns a probe over `bytes[0, length)` (not copied: valid while the bytes are). Throws nothing. */
export function probeFromBytes(bytes: Uint8Array, length: number = bytes.length): KeyProbe {
  let hi = 0;
  let lo = 0;
  for (let i = 0; i < 6; i++) hi = hi * 256 + (i < length ? (bytes[i] as number) : 0);
  for (let i = 6; i < 12; i++) lo = lo * 256 + (i < length ? (bytes[i] as number) : 0);
  return { bytes, length, hi, lo };
}

/** Returns a probe for a binary-string key. Throws nothing. */
export function probeFromString(key: string): KeyProbe {
  const bytes = new Uint8Array(key.length);
  for (let i = 0; i < key.length; i++) bytes[i] = key.charCodeAt(i);
  return probeFromBytes(bytes);
}

/** Returns binary-string keys with their prefix numbers, ready to search. Throws nothing. */
export function searchableKeys(keys: readonly string[]): SearchableKeys {
  const his = new Float64Array(keys.length);
  const los = new Float64Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    let hi = 0;
    let lo = 0;
    for (let j = 0; j < 6; j++) hi = hi * 256 + (j < key.length ? key.charCodeAt(j) : 0);
    for (let j = 6; j < 12; j++) lo = lo * 256 + (j < key.length ? key.charCodeAt(j) : 0);
    his[i] = hi;
    los[i] = lo;
  }
  return { keys, hi: his, lo: los };
}

/** Compares a stored key with a probe as memcmp then length would. Returns <0, 0 or >0. Throws nothing. */
export function compareKeyToProbe(key: string, probe: KeyProbe): number {
  const n = Math.min(key.length, probe.length);
  for (let i = 0; i < n; i++) {
    const d = key.charCodeAt(i) - (probe.bytes[i] as number);
    if (d !== 0) return d;
  }
  return key.length - probe.length;
}

/**
 * Returns the index of the last key <= the probe, or -1 when every key is above it.
 * O(log n), reading key strings only on prefix ties. Throws nothing.
 */
export function lastAtOrBelow(sorted: SearchableKeys, probe: KeyProbe): number {
  const { hi: his, lo: los, keys } = sorted;
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const h = his[mid] as number;
    let below: boolean;
    if (h !== probe.hi) below = h < probe.hi;
    else {
      const l = los[mid] as number;
      below = l !== probe.lo ? l < probe.lo : compareKeyToProbe(keys[mid] as string, probe) <= 0;
    }
    if (below) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}
