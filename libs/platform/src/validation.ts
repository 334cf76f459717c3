import type { z } from 'zod';
import { TesseraError } from '@tessera/core';

/**
 * Validates untrusted input at the edge. Returns the parsed value; throws `BAD_VALUE` whose
 * message names every offending field by path, and whose details list them.
 */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => ({
    path: issue.path.map(String).join('.') || '(root)',
    message: issue.message,
  }));
  const summary = problems.map((p) => `${p.path}: ${p.message}`).join('; ');
  throw new TesseraError('BAD_VALUE', `invalid ${what}: ${summary}`, { details: { problems } });
}
