import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { md5 } from './md5.js';

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

describe('md5', () => {
  it.each([
    ['', 'd41d8cd98f00b204e9800998ecf8427e'],
    ['abc', '900150983cd24fb0d6963f7d28e17f72'],
    ['The quick brown fox jumps over the lazy dog', '9e107d9d372bb6826bd81d3542a419d6'],
  ])('gives the RFC digest for "%s"', (text, digest) => {
    expect(hex(md5(new TextEncoder().encode(text)))).toBe(digest);
  });

  it('agrees with node:crypto on random inputs of every length around block boundaries', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => hex(md5(bytes)) === createHash('md5').update(bytes).digest('hex')),
      { numRuns: 1000 },
    );
  });
});
