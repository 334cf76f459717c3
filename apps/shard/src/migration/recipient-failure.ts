import { TesseraError, isErrorCode } from '@tessera/core';

/**
 * The error of a receipt that failed, with the code of what failed it: a donor killed mid-clone
 * fails the receipt with HOST_UNREACHABLE, which is neither the recipient's fault nor INTERNAL.
 */
export function recipientFailure(error: { code: string; message: string } | undefined): TesseraError {
  const code = isErrorCode(error?.code) ? error.code : 'INTERNAL';
  return new TesseraError(code, `the recipient failed: ${error?.message ?? 'unknown error'}`, { details: { recipientError: error } });
}
