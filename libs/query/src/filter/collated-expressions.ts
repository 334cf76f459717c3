/**
 * The comparison expressions (`$eq $ne $gt $gte $lt $lte $cmp`) under a collation: mingo's compare
 * strings by code units, MongoDB's by the collation. With a collation in force and both operands
 * present they compare in MongoDB's value order with the collation's string order
 * (`compareValues`); otherwise mingo's operator runs, so nothing changes without a collation.
 */
import { evalExpr } from 'mingo/core';
import * as expressionOperators from 'mingo/operators/expression';
import { type StringComparator, type Value, compareValues } from '@tessera/core';

type ExpressionOperator = (obj: unknown, expr: unknown, options: unknown) => unknown;

const mingo = expressionOperators as unknown as Record<string, ExpressionOperator>;

const TESTS: Record<string, (order: number) => unknown> = {
  $eq: (order) => order === 0,
  $ne: (order) => order !== 0,
  $gt: (order) => order > 0,
  $gte: (order) => order >= 0,
  $lt: (order) => order < 0,
  $lte: (order) => order <= 0,
  $cmp: (order) => Math.sign(order),
};

/**
 * The comparison operators, each comparing by the string order `stringsOf` finds for the
 * evaluation's options (undefined: mingo's operator). Throws as mingo's operators do for
 * operands that are not an array of two.
 */
export function collatedComparisons(stringsOf: (options: unknown) => StringComparator | undefined): Record<string, ExpressionOperator> {
  return Object.fromEntries(
    Object.entries(TESTS).map(([name, test]) => {
      const original = mingo[name]!;
      const operator: ExpressionOperator = (obj, expr, options) => {
        const strings = stringsOf(options);
        if (strings === undefined || !Array.isArray(expr) || expr.length !== 2) return original(obj, expr, options);
        const [a, b] = evalExpr(obj as never, expr as never, options as never) as [Value | undefined, Value | undefined];
        if (a === undefined || b === undefined) return original(obj, expr, options);
        return test(compareValues(a, b, strings));
      };
      return [name, operator];
    }),
  );
}
