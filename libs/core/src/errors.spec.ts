import { describe, expect, it } from 'vitest';
import { ERROR_CODES, isErrorCode, isErrorEnvelope, TesseraError } from './errors.js';
import type { ErrorCode } from './errors.js';

describe('TesseraError', () => {
  it.each(Object.keys(ERROR_CODES) as ErrorCode[])('%s takes its retryable flag from the code by default', (code) => {
    expect(new TesseraError(code, 'x').retryable).toBe(ERROR_CODES[code].retryable);
  });

  it('survives a trip through its JSON envelope with code, message, retryable and details', () => {
    const error = new TesseraError('STALE_CONFIG', 'Shard version mismatch.', { details: { namespace: 'db.c' }, retryable: false });
    const back = TesseraError.fromEnvelope(JSON.parse(JSON.stringify(error.toEnvelope())));
    expect(back).toBeInstanceOf(TesseraError);
    expect(back.toEnvelope()).toEqual({
      code: 'STALE_CONFIG',
      message: 'Shard version mismatch.',
      retryable: false,
      details: { namespace: 'db.c' },
    });
  });

  it('turns an envelope with an unknown code into INTERNAL', () => {
    expect(TesseraError.fromEnvelope({ code: 'NO_SUCH_CODE' as ErrorCode, message: 'm', retryable: false }).code).toBe('INTERNAL');
  });

  it('recognises codes and envelopes', () => {
    expect(isErrorCode('BAD_VALUE')).toBe(true);
    expect(isErrorCode('toString')).toBe(false);
    expect(isErrorEnvelope({ code: 'BAD_VALUE', message: 'm', retryable: false })).toBe(true);
    expect(isErrorEnvelope({ code: 'BAD_VALUE' })).toBe(false);
  });

  it('marks the stale-routing codes retryable and StaleChunkHistory not', () => {
    expect(ERROR_CODES.STALE_CONFIG.retryable).toBe(true);
    expect(ERROR_CODES.STALE_EPOCH.retryable).toBe(true);
    expect(ERROR_CODES.STALE_DB_VERSION.retryable).toBe(true);
    expect(ERROR_CODES.STALE_CHUNK_HISTORY.retryable).toBe(false);
  });
});
