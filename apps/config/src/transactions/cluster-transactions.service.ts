import { Injectable } from '@nestjs/common';
import type { ShardClient, ShardTransactions, TransactionId } from '@tessera/protocol';
import { ShardDirectory } from '../ddl/shard-directory.js';

/** How long a shard is given to list its transactions. */
const SHARD_TIMEOUT_MS = 5_000;

/** A transaction across the shards, as an operator sees it. */
export interface ClusterTransaction {
  lsid: string;
  txnNumber: number;
  /**
   * The furthest phase any shard reports: `inProgress`, `preparing` (a commit time reserved),
   * `prepared` (in doubt until its decision arrives), `committing` (the commit decision is
   * durable and being delivered).
   */
  state: 'inProgress' | 'preparing' | 'prepared' | 'committing';
  /** The earliest first statement on any shard (ISO), null when only recovered shards report it. */
  startedAt: string | null;
  coordinator: string | null;
  participants: Array<{ shard: string; state: string }>;
  namespaces: string[];
}

const PHASES = ['inProgress', 'preparing', 'prepared', 'committing'] as const;

/**
 * The cluster's transactions, from every shard's own list (a shard holds them in memory and in
 * its prepared transactions); a shard that does not answer is named instead.
 */
@Injectable()
export class ClusterTransactions {
  constructor(private readonly shards: ShardDirectory) {}

  /**
   * An operator's abortTransaction: every shard aborts the transaction if it holds it open and
   * not yet prepared. A prepared one refuses (its coordinator decides): resolve it instead.
   */
  async abort(id: TransactionId): Promise<ShardActionOutcome[]> {
    return outcomesOf(await this.askEveryShard((client) => client.abortTransaction({ ...id, by: 'operator' }).then(() => 'aborted')));
  }

  /**
   * An operator's resolveTransaction: every shard holding it prepared asks its coordinator for
   * the decision now and applies it (a coordinator with no record presumes abort).
   */
  async resolve(id: TransactionId): Promise<ShardActionOutcome[]> {
    return outcomesOf(await this.askEveryShard(async (client) => (await client.resolveTransaction(id)).outcome));
  }

  async list(): Promise<{ transactions: ClusterTransaction[]; unreachableShards: string[] }> {
    const answers = await this.askEveryShard((client) => client.transactions());
    return {
      transactions: mergeShardTransactions(answers.flatMap((a) => ('answer' in a ? [{ shard: a.shard, answer: a.answer }] : []))),
      unreachableShards: answers.filter((a) => 'error' in a).map((a) => a.shard),
    };
  }

  /** Asks every shard at once; each answer, or the error that came instead. */
  private async askEveryShard<T>(ask: (client: ShardClient) => Promise<T>): Promise<Array<ShardAnswer<T>>> {
    const targets = await this.shards.allNamed(SHARD_TIMEOUT_MS);
    return Promise.all(
      targets.map(({ name, client }) =>
        ask(client).then(
          (answer): ShardAnswer<T> => ({ shard: name, answer }),
          (error: unknown): ShardAnswer<T> => ({ shard: name, error: error as Error }),
        ),
      ),
    );
  }
}

type ShardAnswer<T> = { shard: string; answer: T } | { shard: string; error: Error };

function outcomesOf(answers: ReadonlyArray<ShardAnswer<string>>): ShardActionOutcome[] {
  return answers.map((a) =>
    'answer' in a ? { shard: a.shard, outcome: a.answer, error: null } : { shard: a.shard, outcome: 'failed', error: a.error.message },
  );
}

/** What one shard did with an operator's abort or resolve. */
export interface ShardActionOutcome {
  shard: string;
  /** `aborted`; a resolve's `commit`, `abort`, `pending`, `notPrepared` or `notHere`; `failed` with `error`. */
  outcome: string;
  error: string | null;
}

/** Merges the shards' lists into one entry per transaction, oldest first. Pure. */
export function mergeShardTransactions(lists: ReadonlyArray<{ shard: string; answer: ShardTransactions }>): ClusterTransaction[] {
  const byKey = new Map<string, ClusterTransaction>();
  const entry = (lsid: string, txnNumber: number): ClusterTransaction => {
    const key = `${lsid}:${txnNumber}`;
    let found = byKey.get(key);
    if (found === undefined) {
      found = { lsid, txnNumber, state: 'inProgress', startedAt: null, coordinator: null, participants: [], namespaces: [] };
      byKey.set(key, found);
    }
    return found;
  };
  const advance = (transaction: ClusterTransaction, state: ClusterTransaction['state']) => {
    if (PHASES.indexOf(state) > PHASES.indexOf(transaction.state)) transaction.state = state;
  };
  for (const { shard, answer } of lists) {
    for (const p of answer.participants) {
      const transaction = entry(p.lsid, p.txnNumber);
      transaction.participants.push({ shard, state: p.state });
      if (p.startedAt !== null && (transaction.startedAt === null || p.startedAt < transaction.startedAt))
        transaction.startedAt = p.startedAt;
      transaction.coordinator ??= p.coordinator;
      for (const ns of p.namespaces) if (!transaction.namespaces.includes(ns)) transaction.namespaces.push(ns);
      advance(transaction, p.state === 'reserved' ? 'preparing' : p.state === 'inProgress' ? 'inProgress' : 'prepared');
    }
    for (const c of answer.coordinating) {
      const transaction = entry(c.lsid, c.txnNumber);
      transaction.coordinator = shard;
      advance(transaction, c.phase === 'committing' ? 'committing' : 'preparing');
    }
  }
  return [...byKey.values()].sort((a, b) => (a.startedAt ?? '').localeCompare(b.startedAt ?? ''));
}
