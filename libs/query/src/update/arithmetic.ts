/**
 * `$inc` and `$mul` arithmetic across BSON's numeric types, following MongoDB's promotion: a
 * double anywhere gives a double; otherwise integers stay exact, int32 promotes to int64 when
 * it would overflow, and an int64 overflow is an error rather than a silent wrap.
 */
import { Double, Int32, Long } from 'bson';
import { numericValueOf, TesseraError } from '@tessera/core';
import type { Value } from '@tessera/core';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function isDoubleLike(value: Value): boolean {
  if (value instanceof Double) return true;
  return typeof value === 'number' && !Number.isSafeInteger(value);
}

function tag(value: Value): string {
  return typeof value === 'object' && value !== null ? ((value as { _bsontype?: string })._bsontype ?? 'object') : typeof value;
}

/**
 * Returns `a + b` (`$inc`) or `a * b` (`$mul`) for two number-bracket values.
 * Throws `BAD_VALUE` naming `path` when an integer result leaves the int64 range.
 */
export function applyArithmetic(operator: '$inc' | '$mul', a: Value, b: Value, path: string): Value {
  if (isDoubleLike(a) || isDoubleLike(b)) {
    const x = Number(numericValueOf(a));
    const y = Number(numericValueOf(b));
    const result = operator === '$inc' ? x + y : x * y;
    return a instanceof Double || b instanceof Double ? new Double(result) : result;
  }
  const x = BigInt(numericValueOf(a));
  const y = BigInt(numericValueOf(b));
  const exact = operator === '$inc' ? x + y : x * y;
  if (exact < INT64_MIN || exact > INT64_MAX) {
    throw new TesseraError('BAD_VALUE', `${operator} on '${path}' overflows a 64-bit integer.`, { details: { path, operator } });
  }
  const tags = [tag(a), tag(b)];
  if (tags.includes('bigint')) return exact;
  if (tags.includes('Long')) return Long.fromBigInt(exact);
  const fitsInt32 = exact >= -(2n ** 31n) && exact < 2n ** 31n;
  if (tags.includes('Int32')) return fitsInt32 ? new Int32(Number(exact)) : Long.fromBigInt(exact);
  // Plain JS numbers: bson stores integral numbers beyond int32 as doubles, so beyond 2^53 use int64.
  return exact >= BigInt(Number.MIN_SAFE_INTEGER) && exact <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(exact) : exact;
}

/** The zero `$mul` stores in a missing field, of the operand's numeric type. Throws nothing for numbers. */
export function zeroLike(operand: Value): Value {
  switch (tag(operand)) {
    case 'bigint':
      return 0n;
    case 'Long':
      return Long.fromNumber(0);
    case 'Int32':
      return new Int32(0);
    case 'Double':
      return new Double(0);
    default:
      return 0;
  }
}
