/**
 * MongoDB's collation (language-aware string comparison, ICU's): the spec a command carries and
 * the string comparator it stands for, built on `Intl.Collator` (Node's full ICU). Only string
 * comparison changes; every other type compares as `compareValues` says.
 */
import { TesseraError } from '../errors.js';
import type { Ordering } from './compare-values.js';
import type { Value } from './value.js';

/** A collation as a command gives it (`locale: "simple"` is byte order, the default). */
export interface Collation {
  readonly locale: string;
  readonly strength?: 1 | 2 | 3 | 4 | 5;
  readonly caseLevel?: boolean;
  readonly caseFirst?: 'upper' | 'lower' | 'off';
  readonly numericOrdering?: boolean;
  readonly alternate?: 'non-ignorable' | 'shifted';
  readonly maxVariable?: 'punct' | 'space';
  readonly backwards?: boolean;
  readonly normalization?: boolean;
}

/** Compares two strings under a collation. */
export type StringComparator = (a: string, b: string) => Ordering;

const FIELDS = new Set([
  'locale',
  'strength',
  'caseLevel',
  'caseFirst',
  'numericOrdering',
  'alternate',
  'maxVariable',
  'backwards',
  'normalization',
]);

/**
 * A command's `collation`, checked as MongoDB checks it: undefined for none or `simple` (byte
 * order). Throws `FAILED_TO_PARSE` for a missing locale or an unknown field, `BAD_VALUE` for a
 * value out of range, an unknown locale, or what ICU through `Intl` cannot do (`backwards`, the
 * French secondary order; `maxVariable`).
 */
export function parseCollation(spec: Value | undefined): Collation | undefined {
  if (spec === undefined) return undefined;
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec))
    throw new TesseraError('FAILED_TO_PARSE', 'collation must be a document');
  const fields = spec as Record<string, Value>;
  for (const name of Object.keys(fields)) {
    if (!FIELDS.has(name))
      throw new TesseraError('FAILED_TO_PARSE', `BSON field 'collation.${name}' is an unknown field.`, { details: { field: name } });
  }
  const locale = fields['locale'];
  if (typeof locale !== 'string')
    throw new TesseraError('FAILED_TO_PARSE', "BSON field 'collation.locale' is missing but a required field");
  if (locale === 'simple') {
    if (Object.keys(fields).length > 1)
      throw new TesseraError('BAD_VALUE', 'If "locale" is set to "simple", then no other fields may be specified');
    return undefined;
  }
  if (locale !== 'root' && !isSupportedLocale(locale)) {
    throw new TesseraError('BAD_VALUE', `Field 'locale' is invalid in: ${JSON.stringify(fields)}`, { details: { locale } });
  }
  const strength = fields['strength'] ?? 3;
  if (typeof strength !== 'number' || !Number.isInteger(strength) || strength < 1 || strength > 5) {
    throw new TesseraError('BAD_VALUE', "Field 'strength' must be an integer 1 through 5", { details: { strength } });
  }
  const oneOf = (name: string, allowed: readonly unknown[]) => {
    const value = fields[name];
    if (value !== undefined && !allowed.includes(value))
      throw new TesseraError('BAD_VALUE', `Field '${name}' must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`, {
        details: { [name]: value },
      });
    return value;
  };
  for (const name of ['caseLevel', 'numericOrdering', 'backwards', 'normalization']) oneOf(name, [true, false]);
  oneOf('caseFirst', ['upper', 'lower', 'off']);
  oneOf('alternate', ['non-ignorable', 'shifted']);
  oneOf('maxVariable', ['punct', 'space']);
  if (fields['backwards'] === true || fields['maxVariable'] !== undefined) {
    throw new TesseraError('BAD_VALUE', 'collation fields backwards and maxVariable are not supported', { details: { collation: fields } });
  }
  return fields as unknown as Collation;
}

const comparators = new Map<string, StringComparator>();

/** The string comparator of `collation` (undefined: byte order), built once per distinct collation. */
export function stringComparatorFor(collation: Collation | undefined): StringComparator | undefined {
  if (collation === undefined) return undefined;
  const key = JSON.stringify(collation);
  let comparator = comparators.get(key);
  if (comparator === undefined) {
    comparator = buildComparator(collation);
    comparators.set(key, comparator);
  }
  return comparator;
}

/**
 * ICU's levels through `Intl`: strength 1 compares base letters, 2 adds accents, 3 (the
 * default) case and variants; `caseLevel` adds case to 1 and 2. Strengths 4 and 5 have no
 * `Intl` level of their own: 5 (identical) breaks ties by code points, 4 compares as 3.
 */
function buildComparator(collation: Collation): StringComparator {
  const strength = collation.strength ?? 3;
  const sensitivity =
    strength === 1 ? (collation.caseLevel ? 'case' : 'base') : strength === 2 ? (collation.caseLevel ? 'variant' : 'accent') : 'variant';
  const collator = new Intl.Collator(collation.locale === 'root' ? 'und' : collation.locale, {
    sensitivity,
    numeric: collation.numericOrdering ?? false,
    ignorePunctuation: collation.alternate === 'shifted',
    ...(collation.caseFirst !== undefined ? { caseFirst: collation.caseFirst === 'off' ? 'false' : collation.caseFirst } : {}),
    usage: 'sort',
  });
  return (a, b) => {
    const c = collator.compare(a, b);
    if (c !== 0) return c < 0 ? -1 : 1;
    if (strength === 5 && a !== b) return a < b ? -1 : 1;
    return 0;
  };
}

/** Whether ICU has a collation for `locale` (a malformed tag has none). */
function isSupportedLocale(locale: string): boolean {
  try {
    return Intl.Collator.supportedLocalesOf([locale]).length > 0;
  } catch {
    return false;
  }
}
