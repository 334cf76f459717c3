import { describe, expect, it } from 'vitest';
import { retryableInsertOf, retryableWriteOf } from './retryable-write.js';

const lsid = { id: '6f1c2b9e-3a4d-4e5f-8a7b-9c0d1e2f3a4b' };
const statements = [{ multi: false }, { multi: true }];
const refusal = (s: { multi: boolean }) => (s.multi ? 'an update with multi: true' : undefined);

describe('which writes are retryable', () => {
  it.each([
    ['no txnNumber is an ordinary write', {}, undefined],
    ['an lsid alone is an ordinary write', { lsid }, undefined],
    ['stmtIds default to the statement indexes', { lsid, txnNumber: 3 }, { lsid: lsid.id, txnNumber: 3, stmtIds: [0] }],
    ['stmtIds given are kept', { lsid, txnNumber: 3, stmtIds: [7] }, { lsid: lsid.id, txnNumber: 3, stmtIds: [7] }],
  ])('%s', (_, command, expected) => {
    expect(retryableWriteOf(command, [statements[0]!], refusal)).toEqual(expected);
  });

  it.each([
    ['a txnNumber without an lsid', { txnNumber: 1 }, [statements[0]!], 'INVALID_OPTIONS'],
    ['stmtIds without a txnNumber', { lsid, stmtIds: [0] }, [statements[0]!], 'INVALID_OPTIONS'],
    ['stmtIds of the wrong length', { lsid, txnNumber: 1, stmtIds: [0, 1] }, [statements[0]!], 'BAD_VALUE'],
    ['the same stmtId twice', { lsid, txnNumber: 1, stmtIds: [4, 4] }, [statements[0]!, statements[0]!], 'BAD_VALUE'],
    ['a multi: true update with a txnNumber', { lsid, txnNumber: 1 }, statements, 'INVALID_OPTIONS'],
  ])('refuse %s', (_, command, given, code) => {
    expect(() => retryableWriteOf(command, given, refusal)).toThrow(expect.objectContaining({ code }));
  });

  it('say which statement cannot be retried', () => {
    expect(() => retryableWriteOf({ lsid, txnNumber: 1 }, statements, refusal)).toThrow(
      /statement 1: an update with multi: true cannot be retried/,
    );
  });
});

describe('an insert of several sessions (sessionParts)', () => {
  const other = { id: '0b7e6d5c-4a3b-4c2d-9e1f-0a9b8c7d6e5f' };
  const docs = [{}, {}, {}];

  it('makes one retryable write per part, in order', () => {
    const sessionParts = [
      { lsid, txnNumber: 2, stmtIds: [5, 9] },
      { lsid: other, txnNumber: 7, stmtIds: [0] },
    ];
    expect(retryableInsertOf({ sessionParts }, docs)).toEqual([
      { lsid: lsid.id, txnNumber: 2, stmtIds: [5, 9] },
      { lsid: other.id, txnNumber: 7, stmtIds: [0] },
    ]);
    expect(retryableInsertOf({ lsid, txnNumber: 1 }, docs)).toEqual([{ lsid: lsid.id, txnNumber: 1, stmtIds: [0, 1, 2] }]);
    expect(retryableInsertOf({}, docs)).toBeUndefined();
  });

  it.each([
    [
      'parts beside the command-wide fields',
      { lsid, txnNumber: 1, sessionParts: [{ lsid, txnNumber: 1, stmtIds: [0, 1, 2] }] },
      'INVALID_OPTIONS',
    ],
    ['parts owning fewer documents than sent', { sessionParts: [{ lsid, txnNumber: 1, stmtIds: [0, 1] }] }, 'BAD_VALUE'],
    [
      'one session in two parts',
      {
        sessionParts: [
          { lsid, txnNumber: 1, stmtIds: [0] },
          { lsid, txnNumber: 1, stmtIds: [1, 2] },
        ],
      },
      'BAD_VALUE',
    ],
    ['a stmtId twice in a part', { sessionParts: [{ lsid, txnNumber: 1, stmtIds: [0, 0, 1] }] }, 'BAD_VALUE'],
  ])('refuses %s', (_, command, code) => {
    expect(() => retryableInsertOf(command, docs)).toThrow(expect.objectContaining({ code }));
  });
});
