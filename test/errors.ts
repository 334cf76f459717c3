import { TesseraError } from '@tessera/core';

/** The TesseraError `action` throws; fails the test if it returns or throws anything else. */
export function thrownBy(action: () => unknown): TesseraError {
  try {
    action();
  } catch (error) {
    if (error instanceof TesseraError) return error;
    throw error;
  }
  throw new Error('expected a TesseraError');
}

/** The TesseraError a call rejects with; fails the test if it resolves or rejects with anything else. */
export async function errorOf(promise: Promise<unknown>): Promise<TesseraError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof TesseraError) return error;
    throw error;
  }
  throw new Error('expected the call to fail');
}
