/**
 * UTF-8 and code point order without platform APIs (core imports nothing but `bson`).
 * MongoDB compares strings bytewise over UTF-8, which equals code point order; JavaScript's
 * `<` compares UTF-16 code units, which differs for characters above U+FFFF versus U+E000-U+FFFF.
 */

/** Returns the UTF-8 bytes of `text` (lone surrogates become U+FFFD, as `TextEncoder` does). Throws nothing. */
export function encodeUtf8(text: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    let cp = text.charCodeAt(i);
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (next - 0xdc00);
        i++;
      } else cp = 0xfffd;
    } else if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
    if (cp < 0x80) out.push(cp);
    else if (cp < 0x800) out.push(0xc0 | (cp >> 6), 0x80 | (cp & 0x3f));
    else if (cp < 0x10000) out.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f));
    else out.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3f), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f));
  }
  return Uint8Array.from(out);
}

/** Returns the string whose UTF-8 bytes are `bytes[start, end)`. Invalid sequences become U+FFFD. Throws nothing. */
export function decodeUtf8(bytes: Uint8Array, start = 0, end = bytes.length): string {
  let text = '';
  let i = start;
  while (i < end) {
    const b0 = bytes[i] ?? 0;
    let cp: number;
    let size: number;
    if (b0 < 0x80) [cp, size] = [b0, 1];
    else if (b0 >= 0xf0) [cp, size] = [b0 & 0x07, 4];
    else if (b0 >= 0xe0) [cp, size] = [b0 & 0x0f, 3];
    else if (b0 >= 0xc0) [cp, size] = [b0 & 0x1f, 2];
    else [cp, size] = [0xfffd, 1];
    if (i + size > end) [cp, size] = [0xfffd, end - i];
    else for (let k = 1; k < size; k++) cp = (cp << 6) | ((bytes[i + k] ?? 0) & 0x3f);
    text += String.fromCodePoint(cp);
    i += size;
  }
  return text;
}

/** Maps a UTF-16 code unit so that comparing mapped units orders strings by code point. */
function codePointRank(unit: number): number {
  if (unit < 0xd800) return unit;
  if (unit < 0xe000) return unit + 0x2000; // surrogates: above every BMP character
  return unit - 0x800;
}

/**
 * Compares two strings in code point (= UTF-8 byte) order, as MongoDB does without collation.
 * Returns -1, 0 or 1. Throws nothing.
 */
export function compareStrings(a: string, b: string): -1 | 0 | 1 {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) < codePointRank(y) ? -1 : 1;
  }
  return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
}
