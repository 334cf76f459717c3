import { TesseraError, compareClusterTimestamps } from '@tessera/core';
import { type OpenTransaction, transactionKey } from './open-transaction.js';
import type { ParticipantStore } from './participant.store.js';

/** The longest pause between two looks at a running statement. */
const MAX_LOOK_MS = 400;

/**
 * Wait-die between transactions (Rosenkrantz, Stearns and Lewis, 1978), so that a wait cycle
 * across shards, which no single Postgres sees, costs one transaction and not both. Transactions
 * are ordered by age the same way on every shard: their snapshot (`atClusterTime`, which the
 * router chose for all of them), then session and number. A statement still running after
 * `checkAfterMs` (maxTransactionLockRequestTimeoutMillis; each look is a query, so not too soon)
 * is looked at: blocked by younger open transactions of this shard only, it waits on (up to the
 * Postgres lock_timeout its transaction began with); blocked by an older one, or by a holder that
 * is none of this shard's open transactions, it dies with LockTimeout. Every wait then points
 * from older to younger, so no cycle can form, and in a cycle the younger side dies while the
 * older one waits for it.
 *
 * Updates never wait (they lock NOWAIT: first-committer-wins); what waits is an insert behind
 * another transaction's uncommitted insert of the same key.
 */
export class WaitDie {
  constructor(
    private readonly store: ParticipantStore,
    private readonly open: ReadonlyMap<string, OpenTransaction>,
    private readonly checkAfterMs: number,
  ) {}

  /**
   * Runs one statement of `transaction` under wait-die. It is looked at after `checkAfterMs`,
   * then at doubling intervals (up to `MAX_LOOK_MS`) while it runs.
   */
  async guard<T>(transaction: OpenTransaction, statement: () => Promise<T>): Promise<T> {
    let running = true;
    let died: string | undefined;
    let timer: NodeJS.Timeout | undefined;
    const lookAfter = (ms: number) => {
      timer = setTimeout(() => void look(ms), ms);
    };
    const look = async (waited: number): Promise<void> => {
      const verdict = await this.judge(transaction).catch(() => undefined);
      if (!running) return;
      if (verdict === undefined) return lookAfter(Math.min(waited * 2, MAX_LOOK_MS));
      died = verdict.reason;
      await this.store.cancel(verdict.pid).catch(() => undefined);
    };
    lookAfter(this.checkAfterMs);
    try {
      return await statement();
    } catch (error) {
      if (died === undefined) throw error;
      throw new TesseraError('LOCK_TIMEOUT', `this transaction waited for a lock held by ${died} (wait-die)`, { cause: error });
    } finally {
      running = false;
      clearTimeout(timer);
    }
  }

  /** Must the transaction die now (its backend, and why): it waits for an older transaction or an unknown holder. */
  private async judge(transaction: OpenTransaction): Promise<{ pid: number; reason: string } | undefined> {
    const waiting = await this.store.blockersOf(transactionKey(transaction.id));
    if (waiting === undefined) return undefined;
    for (const name of waiting.blockers) {
      const holder = name === null ? undefined : this.open.get(name);
      if (holder === undefined) return { pid: waiting.pid, reason: 'a holder that is no open transaction of this shard' };
      if (older(holder, transaction)) return { pid: waiting.pid, reason: `the older transaction ${name}` };
    }
    return undefined;
  }
}

/** Whether `a` is older than `b`: the same answer on every shard. */
function older(a: OpenTransaction, b: OpenTransaction): boolean {
  const byTime = compareClusterTimestamps(a.atClusterTime, b.atClusterTime);
  if (byTime !== 0) return byTime < 0;
  if (a.id.lsid.id !== b.id.lsid.id) return a.id.lsid.id < b.id.lsid.id;
  return a.id.txnNumber < b.id.txnNumber;
}
