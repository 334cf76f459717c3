import { describe, expect, it } from 'vitest';
import { buildDocument, jsonBytes } from './documents.ts';
import { RANDOM_KEY_SPACE, monotonicKeys, randomKeys, scrambleId, seededRandom } from './keys.ts';

describe('shard key generators', () => {
  it('gives each iteration its own increasing block of monotonic keys', () => {
    expect(monotonicKeys(0, 3)).toEqual([0, 1, 2]);
    expect(monotonicKeys(7, 3)).toEqual([21, 22, 23]);
    const all = Array.from({ length: 100 }, (_, i) => monotonicKeys(i, 10)).flat();
    expect(new Set(all).size).toBe(1000);
    expect(all).toEqual([...all].sort((a, b) => a - b));
  });

  it('draws random keys in the key space, the same ones for the same seed', () => {
    const keys = randomKeys(seededRandom(42), 1000);
    expect(keys.every((k) => Number.isInteger(k) && k >= 0 && k < RANDOM_KEY_SPACE)).toBe(true);
    expect(randomKeys(seededRandom(42), 1000)).toEqual(keys);
    expect(randomKeys(seededRandom(43), 1000)).not.toEqual(keys);
    // Spread over the space: every eighth of it gets some.
    const eighths = new Set(keys.map((k) => Math.floor((k / RANDOM_KEY_SPACE) * 8)));
    expect(eighths.size).toBe(8);
  });

  it('scrambles ids without collisions and spreads consecutive ones over the key space', () => {
    const scrambled = Array.from({ length: 10_000 }, (_, id) => scrambleId(id));
    expect(new Set(scrambled).size).toBe(10_000);
    expect(scrambled.every((k) => Number.isInteger(k) && k >= 0 && k < RANDOM_KEY_SPACE)).toBe(true);
    const quarters = new Set(scrambled.slice(0, 100).map((k) => Math.floor((k / RANDOM_KEY_SPACE) * 4)));
    expect(quarters.size).toBe(4);
    expect(scrambleId(123_456_789)).toBe(scrambleId(123_456_789));
  });
});

describe('document builder', () => {
  it.each([128, 200, 1024, 4096])('pads a document to exactly %d bytes of JSON', (bytes) => {
    const document = buildDocument({ _id: 123456, x: 987654321 }, bytes, 7);
    expect(jsonBytes(document)).toBe(bytes);
    expect(document).toMatchObject({ _id: 123456, x: 987654321 });
  });

  it('never cuts the fields when they alone are larger than the size asked', () => {
    const document = buildDocument({ _id: 1, name: 'n'.repeat(300) }, 128);
    expect(document.pad).toBe('');
    expect(document.name).toHaveLength(300);
  });

  it('varies the pad with the seed', () => {
    expect(buildDocument({ _id: 1 }, 200, 1).pad).not.toBe(buildDocument({ _id: 1 }, 200, 2).pad);
  });
});
