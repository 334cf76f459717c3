/**
 * Order-preserving encoding of numbers of every width (double, int32, int64) so that equal
 * values give equal bytes and byte order equals numeric order, exactly (no rounding of int64
 * through doubles).
 *
 * Layout after the number type tag: one class byte, then for non-zero finite numbers and
 * infinities 10 more bytes.
 *   0x01 NaN | 0x02 negative | 0x03 zero (also -0) | 0x04 positive
 * A non-zero number is ±1.f × 2^E. Positive: E + 1075 as uint16 BE (infinity: 0xFFFF), then
 * the 64 fraction bits f left-aligned, BE. Negative: the same 10 bytes inverted, so a larger
 * magnitude sorts lower. E ranges over -1074..1023 (doubles incl. subnormals) and 53..63
 * (int64 beyond 2^53); 64 fraction bits hold any double's 52 or any int64's at most 62.
 */
import { Long } from 'bson';
import { TesseraError } from '../errors.js';
import type { ByteWriter } from './byte-writer.js';

const NUMBER_NAN = 0x01;
const NUMBER_NEGATIVE = 0x02;
const NUMBER_ZERO = 0x03;
const NUMBER_POSITIVE = 0x04;
const EXPONENT_BIAS = 1075;
const INFINITY_EXPONENT = 0xffff;
const MASK64 = (1n << 64n) - 1n;
const TWO_POW_53 = 2n ** 53n;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const scratch = new DataView(new ArrayBuffer(8));

/** Writes the order-preserving encoding of a double or an int64. Throws nothing. */
export function writeNumber(out: ByteWriter, value: number | bigint): void {
  if (typeof value === 'bigint') {
    if (value >= -TWO_POW_53 && value <= TWO_POW_53) return writeNumber(out, Number(value));
    const negative = value < 0n;
    const magnitude = negative ? -value : value;
    const exponent = magnitude.toString(2).length - 1;
    const fraction = ((magnitude - (1n << BigInt(exponent))) << BigInt(64 - exponent)) & MASK64;
    return writeParts(out, negative, exponent + EXPONENT_BIAS, Number(fraction >> 32n), Number(fraction & 0xffffffffn));
  }
  if (Number.isNaN(value)) return out.byte(NUMBER_NAN);
  if (value === 0) return out.byte(NUMBER_ZERO);
  const negative = value < 0;
  if (!Number.isFinite(value)) return writeParts(out, negative, INFINITY_EXPONENT, 0, 0);
  scratch.setFloat64(0, Math.abs(value), false);
  const hi = scratch.getUint32(0, false);
  const lo = scratch.getUint32(4, false);
  const biased = hi >>> 20;
  if (biased === 0) {
    // Subnormal: normalise the mantissa so the leading 1 becomes implicit.
    const mantissa = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
    const top = mantissa.toString(2).length - 1;
    const fraction = ((mantissa - (1n << BigInt(top))) << BigInt(64 - top)) & MASK64;
    return writeParts(out, negative, top - 1074 + EXPONENT_BIAS, Number(fraction >> 32n), Number(fraction & 0xffffffffn));
  }
  const fractionHi = (((hi & 0xfffff) << 12) | (lo >>> 20)) >>> 0;
  const fractionLo = (lo << 12) >>> 0;
  writeParts(out, negative, biased - 1023 + EXPONENT_BIAS, fractionHi, fractionLo);
}

/**
 * Writes `writeNumber`'s encoding of a `Long` (signed or unsigned) from its 32-bit halves,
 * without a bigint: hashed shard keys are Longs, and one is encoded for every routed document.
 * The same bytes as `writeNumber` of its value. Throws nothing.
 */
export function writeLong(out: ByteWriter, value: Long): void {
  let hi = value.high >>> 0;
  let lo = value.low >>> 0;
  if (hi === 0 && lo === 0) return out.byte(NUMBER_ZERO);
  const negative = !value.unsigned && value.high < 0;
  if (negative) {
    // The magnitude, two's complement negated (2^63 for the minimum, which uint32 halves hold).
    lo = (~lo + 1) >>> 0;
    hi = (~hi + (lo === 0 ? 1 : 0)) >>> 0;
  }
  // The magnitude is 1.f x 2^E: the bits below its leading one, left-aligned in 64 bits.
  if (hi !== 0) {
    const shift = Math.clz32(hi) + 1;
    const fractionHi = shift === 32 ? lo : ((hi << shift) | (lo >>> (32 - shift))) >>> 0;
    const fractionLo = shift === 32 ? 0 : (lo << shift) >>> 0;
    return writeParts(out, negative, 64 - shift + EXPONENT_BIAS, fractionHi, fractionLo);
  }
  const shift = Math.clz32(lo) + 1;
  writeParts(out, negative, 32 - shift + EXPONENT_BIAS, shift === 32 ? 0 : (lo << shift) >>> 0, 0);
}

function writeParts(out: ByteWriter, negative: boolean, exponent: number, fractionHi: number, fractionLo: number): void {
  const flip = negative ? 0xff : 0;
  out.byte(negative ? NUMBER_NEGATIVE : NUMBER_POSITIVE);
  out.byte(((exponent >>> 8) & 0xff) ^ flip);
  out.byte((exponent & 0xff) ^ flip);
  out.uint32BE(negative ? ~fractionHi >>> 0 : fractionHi);
  out.uint32BE(negative ? ~fractionLo >>> 0 : fractionLo);
}

/**
 * Reads a number written by `writeNumber` at `offset`. Returns the value and the offset after
 * it: a JS number, or a `Long` for integers beyond 2^53 that fit int64.
 * Throws `BAD_VALUE` on bytes no number encodes to.
 */
export function readNumber(bytes: Uint8Array, offset: number): { value: number | Long; next: number } {
  const kind = bytes[offset];
  if (kind === NUMBER_NAN) return { value: NaN, next: offset + 1 };
  if (kind === NUMBER_ZERO) return { value: 0, next: offset + 1 };
  if ((kind !== NUMBER_NEGATIVE && kind !== NUMBER_POSITIVE) || offset + 11 > bytes.length) throw corrupt(offset);
  const negative = kind === NUMBER_NEGATIVE;
  const flip = negative ? 0xff : 0;
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset + 1, 10);
  const exponent = (((view.getUint8(0) ^ flip) << 8) | (view.getUint8(1) ^ flip)) >>> 0;
  const fractionHi = negative ? ~view.getUint32(2, false) >>> 0 : view.getUint32(2, false);
  const fractionLo = negative ? ~view.getUint32(6, false) >>> 0 : view.getUint32(6, false);
  const next = offset + 11;
  if (exponent === INFINITY_EXPONENT) return { value: negative ? -Infinity : Infinity, next };
  const e = exponent - EXPONENT_BIAS;
  if (e >= 53 && e <= 63) {
    const fraction = (BigInt(fractionHi) << 32n) | BigInt(fractionLo);
    if (((fraction << BigInt(e)) & MASK64) === 0n) {
      const magnitude = (1n << BigInt(e)) | (fraction >> BigInt(64 - e));
      const integer = negative ? -magnitude : magnitude;
      if (integer >= INT64_MIN && integer <= INT64_MAX) return { value: Long.fromBigInt(integer), next };
    }
  }
  if ((fractionLo & 0xfff) !== 0 || e < -1074 || e > 1023) throw corrupt(offset);
  let magnitude: number;
  if (e >= -1022) {
    scratch.setUint32(0, (((e + 1023) << 20) | (fractionHi >>> 12)) >>> 0, false);
    scratch.setUint32(4, (((fractionHi & 0xfff) << 20) | (fractionLo >>> 12)) >>> 0, false);
    magnitude = scratch.getFloat64(0, false);
  } else {
    const mantissa = ((1n << 52n) | (BigInt(fractionHi) << 20n) | BigInt(fractionLo >>> 12)) >> BigInt(-1022 - e);
    scratch.setBigUint64(0, mantissa, false);
    magnitude = scratch.getFloat64(0, false);
  }
  return { value: negative ? -magnitude : magnitude, next };
}

function corrupt(offset: number): TesseraError {
  return new TesseraError('BAD_VALUE', `Encoded key holds an invalid number at byte ${offset}.`, { details: { offset } });
}
