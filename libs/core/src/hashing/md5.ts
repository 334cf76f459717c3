/**
 * MD5 (RFC 1321) in plain TypeScript, because core may not import `node:crypto`. Used only to
 * compute MongoDB-compatible hashed shard key values, not for security.
 */

const SHIFTS = new Uint8Array([
  7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11,
  16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
]);

/** K[i] = floor(2^32 × |sin(i + 1)|), as RFC 1321 defines the table. */
const K = Uint32Array.from({ length: 64 }, (_, i) => Math.floor(Math.abs(Math.sin(i + 1)) * 2 ** 32) >>> 0);

/** The message word each of the 64 steps reads. */
const WORD = Uint8Array.from({ length: 64 }, (_, i) => (i < 16 ? i : i < 32 ? (5 * i + 1) % 16 : i < 48 ? (3 * i + 5) % 16 : (7 * i) % 16));

/** Returns the 16-byte MD5 digest of `input`. Throws nothing. */
export function md5(input: Uint8Array): Uint8Array {
  const words = md5Words(input, input.length);
  const digest = new Uint8Array(16);
  for (let w = 0; w < 4; w++) for (let i = 0; i < 4; i++) digest[4 * w + i] = (words[w]! >>> (8 * i)) & 0xff;
  return digest;
}

/** The block being hashed, padded; grown when a longer input comes. */
let padded = new Uint8Array(128);
const message = new Uint32Array(16);
const state = new Uint32Array(4);

/**
 * The MD5 digest of the first `length` bytes of `input` as its four little-endian 32-bit words
 * (digest bytes 0-3 are word 0, and so on), in a buffer that the next call overwrites: hashed
 * shard keys hash a few dozen bytes on every routed document, so nothing is allocated here.
 * Throws nothing.
 */
export function md5Words(input: Uint8Array, length: number): Uint32Array {
  const paddedLength = (((length + 8) >> 6) + 1) << 6;
  if (padded.length < paddedLength) padded = new Uint8Array(paddedLength * 2);
  padded.set(input.subarray(0, length));
  padded.fill(0, length, paddedLength);
  padded[length] = 0x80;
  const bitLength = length * 8;
  const lengthAt = paddedLength - 8;
  for (let i = 0; i < 4; i++) padded[lengthAt + i] = (bitLength >>> (8 * i)) & 0xff;
  const high = Math.floor(bitLength / 2 ** 32);
  for (let i = 0; i < 4; i++) padded[lengthAt + 4 + i] = (high >>> (8 * i)) & 0xff;

  let a0 = 0x67452301;
  let b0 = 0xefcdab89;
  let c0 = 0x98badcfe;
  let d0 = 0x10325476;
  const m = message;
  for (let offset = 0; offset < paddedLength; offset += 64) {
    for (let j = 0, at = offset; j < 16; j++, at += 4) {
      m[j] = (padded[at]! | (padded[at + 1]! << 8) | (padded[at + 2]! << 16) | (padded[at + 3]! << 24)) >>> 0;
    }
    let a = a0;
    let b = b0;
    let c = c0;
    let d = d0;
    for (let i = 0; i < 64; i++) {
      const f = i < 16 ? (b & c) | (~b & d) : i < 32 ? (d & b) | (~d & c) : i < 48 ? b ^ c ^ d : c ^ (b | ~d);
      const sum = (a + f + K[i]! + m[WORD[i]!]!) >>> 0;
      const shift = SHIFTS[i]!;
      a = d;
      d = c;
      c = b;
      b = (b + ((sum << shift) | (sum >>> (32 - shift)))) >>> 0;
    }
    a0 = (a0 + a) >>> 0;
    b0 = (b0 + b) >>> 0;
    c0 = (c0 + c) >>> 0;
    d0 = (d0 + d) >>> 0;
  }
  state[0] = a0;
  state[1] = b0;
  state[2] = c0;
  state[3] = d0;
  return state;
}
