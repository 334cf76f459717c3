import { describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCode, TesseraError } from '@tessera/core';
import { httpStatusFor } from './http-status.js';

describe('error codes over HTTP', () => {
  it.each(Object.keys(ERROR_CODES) as ErrorCode[])('%s maps to an error status', (code) => {
    const status = httpStatusFor(code);
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(600);
  });

  it('keeps an error whole through its envelope', () => {
    const original = new TesseraError('STALE_CONFIG', 'shard version mismatch', { details: { received: '1|0', wanted: '2|0' } });
    const rebuilt = TesseraError.fromEnvelope(JSON.parse(JSON.stringify(original.toEnvelope())));
    expect(rebuilt).toBeInstanceOf(TesseraError);
    expect([rebuilt.code, rebuilt.message, rebuilt.retryable, rebuilt.details]).toEqual([
      'STALE_CONFIG',
      'shard version mismatch',
      true,
      { received: '1|0', wanted: '2|0' },
    ]);
  });
});
