import { describe, expect, it } from 'vitest';
import { type BankOp, checkBank } from './bank.js';
import type { ListOp, ListTxn, TxnStatus } from './history.js';
import { checkListAppend } from './list-append.js';

const a = (key: string, value: number): ListOp => ({ f: 'append', key, value });
const r = (key: string, value: number[]): ListOp => ({ f: 'r', key, value });
const t = (id: number, status: TxnStatus, ...ops: ListOp[]): ListTxn => ({ id, status, ops });
const typesOf = (history: ListTxn[]) => checkListAppend(history).anomalies.map((x) => x.type);

describe('the list-append checker', () => {
  it('finds nothing in a serial history', () => {
    expect(typesOf([t(1, 'ok', a('x', 1)), t(2, 'ok', r('x', [1]), a('x', 2)), t(3, 'ok', r('x', [1, 2]), r('y', []))])).toEqual([]);
  });

  it('finds G1a: a read of an aborted append', () => {
    const result = checkListAppend([t(1, 'fail', a('x', 1)), t(2, 'ok', r('x', [1]))]);
    expect(result.anomalies).toMatchObject([{ type: 'G1a', txns: [2, 1] }]);
  });

  it('takes an indeterminate append that was read as committed', () => {
    expect(typesOf([t(1, 'info', a('x', 1)), t(2, 'ok', r('x', [1]))])).toEqual([]);
  });

  it('finds G1b: a read that ends at an intermediate append', () => {
    // T2 read T1's first append and not its second: T1 -wr-> T2 -rw-> T1 is a G-single cycle too.
    expect(typesOf([t(1, 'ok', a('x', 1), a('x', 2)), t(2, 'ok', r('x', [1])), t(3, 'ok', r('x', [1, 2]))])).toEqual(['G1b', 'G-single']);
  });

  it('finds G0: appends ordered one way on x and the other way on y', () => {
    const result = checkListAppend([
      t(1, 'ok', a('x', 1), a('y', 2)),
      t(2, 'ok', a('x', 2), a('y', 1)),
      t(3, 'ok', r('x', [1, 2]), r('y', [1, 2])),
    ]);
    expect(result.anomalies.map((x) => x.type)).toEqual(['G0']);
    expect(result.anomalies[0]!.txns).toEqual([1, 2]);
    expect(result.anomalies[0]!.message).toBe('G0 cycle: T1 -ww(x=2)-> T2 -ww(y=2)-> T1');
  });

  it('finds G1c: each transaction read the other one’s append', () => {
    expect(typesOf([t(1, 'ok', a('x', 1), r('y', [1])), t(2, 'ok', a('y', 1), r('x', [1]))])).toEqual(['G1c']);
  });

  it('finds G-single: read skew, one write seen on y and not on x', () => {
    const result = checkListAppend([t(1, 'ok', a('x', 1), a('y', 1)), t(2, 'ok', r('x', []), r('y', [1])), t(3, 'ok', r('x', [1]))]);
    expect(result.anomalies.map((x) => x.type)).toEqual(['G-single']);
    expect(result.anomalies[0]!.cycle!.map((e) => e.kind)).toEqual(['rw', 'wr']);
  });

  it('finds G2-item: write skew, which snapshot isolation allows', () => {
    const result = checkListAppend([
      t(1, 'ok', r('x', []), a('y', 1)),
      t(2, 'ok', r('y', []), a('x', 1)),
      t(3, 'ok', r('x', [1]), r('y', [1])),
    ]);
    expect(result.anomalies.map((x) => x.type)).toEqual(['G2-item']);
    expect(result.anomalies[0]!.cycle!.map((e) => e.kind)).toEqual(['rw', 'rw']);
  });

  it('finds reads that no single order explains, and a value read twice', () => {
    const history = [
      t(1, 'ok', a('x', 1)),
      t(2, 'ok', a('x', 2)),
      t(3, 'ok', r('x', [1, 2])),
      t(4, 'ok', r('x', [2, 1])),
      t(5, 'ok', r('z', [7, 7])),
    ];
    expect(typesOf(history).sort()).toEqual(['duplicate-elements', 'incompatible-order']);
  });

  it('ignores what aborted and unknown transactions read', () => {
    expect(typesOf([t(1, 'ok', a('x', 1), a('x', 2)), t(2, 'fail', r('x', [1])), t(3, 'info', r('x', [1]))])).toEqual([]);
  });
});

describe('the bank checker', () => {
  const accounts = ['a', 'b', 'c'];
  it('finds nothing when every read sums to the total', () => {
    const history = [
      { id: 1, status: 'ok' as const, f: 'transfer' as const, from: 'a', to: 'b', amount: 5 },
      { id: 2, status: 'ok' as const, f: 'read' as const, balances: { a: 5, b: 15, c: 10 } },
    ];
    expect(checkBank(history, accounts, 30)).toEqual([]);
  });

  it('finds a read that saw one side of a transfer, a negative balance and a missing account', () => {
    const history: BankOp[] = [
      { id: 1, status: 'ok' as const, f: 'read' as const, balances: { a: 5, b: 10, c: 10 } },
      { id: 2, status: 'ok' as const, f: 'read' as const, balances: { a: -5, b: 25, c: 10 } },
      { id: 3, status: 'ok' as const, f: 'read' as const, balances: { a: 10, b: 20 } },
      { id: 4, status: 'fail' as const, f: 'read' as const, balances: { a: 0, b: 0, c: 0 } },
    ];
    expect(checkBank(history, accounts, 30).map((x) => [x.type, x.read])).toEqual([
      ['wrong-total', 1],
      ['negative-balance', 2],
      ['missing-account', 3],
    ]);
  });
});
