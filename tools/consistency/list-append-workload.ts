import { Agent } from 'undici';
import type { Random } from '@tessera/core';
import type { ListOp, ListTxn } from './history.js';
import { type Outcome, TransactionSession } from './transaction-client.js';

export interface ListAppendWorkloadOptions {
  /** The routers' base URLs; each client session keeps to one while it answers. */
  routers: readonly string[];
  /** The `Authorization` header the clients send, when the routers check their callers. */
  authorization?: string;
  /** `db.collection` of the lists: `{ _id: <key number>, list: [...] }`, one document per key, made beforehand. */
  ns: string;
  keys: number;
  clients: number;
  /** Micro-operations per transaction, at most. */
  maxOps: number;
  done: () => boolean;
  random: Random;
  /** Told why each aborted transaction aborted (an error's codeName, or `unreachable`). */
  onAbort?: (reason: string) => void;
  record?: (txn: ListTxn) => void;
}

/**
 * Elle's list-append workload: each transaction appends unique values to some keys' lists
 * (`$push`) and reads whole lists, in a random order; answers the history for
 * `checkListAppend`, each transaction with its outcome and what its reads saw.
 */
export async function runListAppendWorkload(options: ListAppendWorkloadOptions): Promise<ListTxn[]> {
  const [db, coll] = options.ns.split('.') as [string, string];
  const path = `/v1/${db}/${coll}`;
  const agent = new Agent({ connections: options.clients + 1 });
  const history: ListTxn[] = [];
  let nextId = 0;
  let nextValue = 1;
  const client = async (n: number) => {
    const start = n % options.routers.length;
    const session = new TransactionSession(
      [...options.routers.slice(start), ...options.routers.slice(0, start)],
      agent,
      options.authorization,
    );
    while (!options.done()) {
      const count = 1 + Math.floor(options.random.nextFloat() * options.maxOps);
      const ops: ListOp[] = Array.from({ length: count }, () => {
        const key = String(Math.floor(options.random.nextFloat() * options.keys));
        return options.random.nextFloat() < 0.5 ? { f: 'append', key, value: nextValue++ } : { f: 'r', key, value: null };
      });
      const done: ListOp[] = [];
      const outcome: Outcome = await session.run(async (s) => {
        for (let n = 0; n < ops.length;) {
          const op = ops[n]!;
          if (op.f === 'append') {
            await s.statement(`${path}/update`, { updates: [{ q: { _id: Number(op.key) }, u: { $push: { list: op.value } } }] });
            done.push(op);
            n++;
            continue;
          }
          // Reads in a row go as one find, which reads their shards at once.
          let end = n;
          while (end < ops.length && ops[end]!.f === 'r') end++;
          const reads = ops.slice(n, end);
          const found = await s.statement(`${path}/find`, { filter: { _id: { $in: [...new Set(reads.map((r) => Number(r.key)))] } } });
          const lists = new Map(
            (found.cursor as { firstBatch: Array<{ _id: number; list?: number[] }> }).firstBatch.map((d) => [String(d._id), d.list ?? []]),
          );
          for (const read of reads) done.push({ f: 'r', key: read.key, value: lists.get(read.key) ?? [] });
          n = end;
        }
      });
      if (outcome === 'aborted') options.onAbort?.(session.lastAbortReason ?? 'unknown');
      const txn: ListTxn = {
        id: nextId++,
        status: outcome === 'committed' ? 'ok' : outcome === 'aborted' ? 'fail' : 'info',
        // An aborted transaction's reads tell nothing; its appends are what G1a looks for.
        ops: outcome === 'aborted' ? ops.filter((op) => op.f === 'append') : done,
      };
      history.push(txn);
      options.record?.(txn);
    }
  };
  try {
    await Promise.all(Array.from({ length: options.clients }, (_, n) => client(n)));
  } finally {
    await agent.close();
  }
  return history;
}
