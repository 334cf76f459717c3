import { describe, expect, it } from 'vitest';
import { documentIdFromPath } from './extended-json.js';
import { namespaceOf } from './namespace.js';

describe('namespace names', () => {
  it.each([
    ['my$db', 'c'],
    ['a.b', 'c'],
    ['a b', 'c'],
    ['', 'c'],
    ['x'.repeat(64), 'c'],
    ['db', ''],
    ['db', 'c$x'],
    ['db', 'system.users'],
  ])('refuses database %j with collection %j as INVALID_NAMESPACE', (db, coll) => {
    expect(() => namespaceOf(db, coll)).toThrow(expect.objectContaining({ code: 'INVALID_NAMESPACE' }));
  });

  it('accepts MongoDB-valid names, dots inside a collection name included', () => {
    expect(namespaceOf('shop', 'orders.2024')).toBe('shop.orders.2024');
    expect(namespaceOf('x'.repeat(63), 'c')).toBe(`${'x'.repeat(63)}.c`);
  });
});

describe('document ids in paths', () => {
  it('reads 24 hex digits as an ObjectId, an integer as a number and anything else as a string', () => {
    expect(String(documentIdFromPath('65a1b2c3d4e5f60718293a4b'))).toBe('65a1b2c3d4e5f60718293a4b');
    expect(documentIdFromPath('65a1b2c3d4e5f60718293a4b')).not.toBeTypeOf('string');
    expect(documentIdFromPath('42')).toBe(42);
    expect(documentIdFromPath('-7')).toBe(-7);
    expect(documentIdFromPath('007')).toBe('007');
    expect(documentIdFromPath('alice')).toBe('alice');
  });
});
