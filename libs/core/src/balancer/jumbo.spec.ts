import { describe, expect, it } from 'vitest';
import { decideOnChunkTooBig, isTooBigToMove } from './jumbo.js';

describe('jumbo handling', () => {
  it('refuses to move a chunk only above twice the max chunk size', () => {
    expect(isTooBigToMove(256, 128)).toBe(false);
    expect(isTooBigToMove(257, 128)).toBe(true);
  });

  it('splits a chunk refused as too big when splitVector found split points', () => {
    expect(decideOnChunkTooBig([[5]])).toEqual({ action: 'split', splitPoints: [[5]] });
  });

  it('marks the chunk jumbo when it cannot be split', () => {
    expect(decideOnChunkTooBig([])).toEqual({ action: 'markJumbo' });
  });
});
