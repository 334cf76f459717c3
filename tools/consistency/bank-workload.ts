import { Agent } from 'undici';
import type { Random } from '@tessera/core';
import type { BankOp } from './bank.js';
import { TransactionSession } from './transaction-client.js';

export interface BankWorkloadOptions {
  /** The routers' base URLs; each client session keeps to one while it answers. */
  routers: readonly string[];
  /** The `Authorization` header the clients send, when the routers check their callers. */
  authorization?: string;
  /** `db.collection` of the accounts: `{ _id: <number>, balance }`. */
  ns: string;
  accounts: number;
  /** Concurrent clients moving money; one more reads all balances. */
  transferers: number;
  /** Runs until this returns true. */
  done: () => boolean;
  /** Told of each operation as it completes (the history answered at the end holds them too). */
  /** Told why each aborted transaction aborted (an error's codeName, or `unreachable`). */
  onAbort?: (reason: string) => void;
  record?: (op: BankOp) => void;
  /** The workload's only source of choices: seeded, so a run's choices follow from its seed. */
  random: Random;
}

/**
 * The bank workload (as Jepsen's): clients move money between random accounts in transactions
 * that read both balances and refuse to overdraw, while a reader reads every balance in one
 * transaction. Answers the history for `checkBank`: transfers with their outcome (`ok`,
 * `fail`, `info` when unknown) and the committed reads.
 */
export async function runBankWorkload(options: BankWorkloadOptions): Promise<BankOp[]> {
  const [db, coll] = options.ns.split('.') as [string, string];
  const path = `/v1/${db}/${coll}`;
  const agent = new Agent({ connections: options.transferers + 2 });
  const history: BankOp[] = [];
  let nextId = 0;
  const push = (op: BankOp) => {
    history.push(op);
    options.record?.(op);
  };
  const transferer = async (n: number) => {
    const session = new TransactionSession(rotate(options.routers, n), agent, options.authorization);
    while (!options.done()) {
      const from = Math.floor(options.random.nextFloat() * options.accounts);
      const to = (from + 1 + Math.floor(options.random.nextFloat() * (options.accounts - 1))) % options.accounts;
      const amount = 1 + Math.floor(options.random.nextFloat() * 5);
      let overdrawn = false;
      const outcome = await session.run(async (s) => {
        const found = await s.statement(`${path}/find`, { filter: { _id: from } });
        const balance = (found.cursor as { firstBatch: Array<{ balance: number }> }).firstBatch[0]?.balance ?? 0;
        if (balance < amount) {
          overdrawn = true;
          return;
        }
        await s.statement(`${path}/update`, { updates: [{ q: { _id: from }, u: { $inc: { balance: -amount } } }] });
        await s.statement(`${path}/update`, { updates: [{ q: { _id: to }, u: { $inc: { balance: amount } } }] });
      });
      if (outcome === 'aborted') options.onAbort?.(session.lastAbortReason ?? 'unknown');
      if (overdrawn) continue;
      push({ id: nextId++, status: statusOf(outcome), f: 'transfer', from: String(from), to: String(to), amount });
    }
  };
  const reader = async () => {
    const session = new TransactionSession(options.routers, agent, options.authorization);
    while (!options.done()) {
      let balances: Record<string, number> | null = null;
      const outcome = await session.run(async (s) => {
        const found = await s.statement(`${path}/find`, { filter: {}, batchSize: options.accounts + 1 });
        const docs = (found.cursor as { firstBatch: Array<{ _id: number; balance: number }> }).firstBatch;
        balances = Object.fromEntries(docs.map((d) => [String(d._id), d.balance]));
      });
      if (outcome === 'aborted') options.onAbort?.(session.lastAbortReason ?? 'unknown');
      push({ id: nextId++, status: statusOf(outcome), f: 'read', balances });
    }
  };
  try {
    await Promise.all([...Array.from({ length: options.transferers }, (_, n) => transferer(n)), reader()]);
  } finally {
    await agent.close();
  }
  return history;
}

function statusOf(outcome: 'committed' | 'aborted' | 'unknown'): BankOp['status'] {
  return outcome === 'committed' ? 'ok' : outcome === 'aborted' ? 'fail' : 'info';
}

/** The routers starting at the `n`th, so that clients spread over them. */
function rotate(routers: readonly string[], n: number): string[] {
  const start = n % routers.length;
  return [...routers.slice(start), ...routers.slice(0, start)];
}
