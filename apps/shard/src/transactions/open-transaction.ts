import type { QueryRunner } from 'typeorm';
import type { ClusterTimestamp } from '@tessera/core';
import type { TransactionId } from '@tessera/protocol';
import type { CollectionHandle, TransactionWork } from '../documents/document-store.js';
import type { WriteTime } from '../history/write-time.js';
import type { PreparedTransaction, WrittenDocuments } from './participant.store.js';
import type { OperationLease } from '../sharding/sharding-runtime.service.js';

/**
 * Where a transaction is on a participant: taking statements, holding a commit time for the
 * coordinator (`reserved`), or prepared (its Postgres transaction durable, its connection given
 * back). Committed and aborted transactions are no longer open.
 */
export type OpenTransactionState = 'inProgress' | 'reserved' | 'prepared';

/**
 * One transaction on a participant: the Postgres transaction its statements run in, held across
 * requests, with what it wrote. Its statements and phases run one at a time (`serially`): one
 * connection cannot run two statements at once.
 */
export class OpenTransaction {
  state: OpenTransactionState = 'inProgress';
  /** A time held in flight (reads at or after it wait) from the reservation until the transaction ends. */
  reservation: { writeTime: WriteTime; release: () => void } | undefined;
  /** From prepare (or a lone commit) to the end: the leases that keep migrations of what it wrote waiting. */
  leases: OperationLease[] = [];
  reservedAt: number | undefined;
  /** Set once prepared: its global transaction id and what the id names. */
  prepared: PreparedTransaction | undefined;
  preparedAt: number | undefined;
  private readonly written = new Map<string, WrittenDocuments>();
  private queue: Promise<unknown> = Promise.resolve();
  private markEnded: () => void = () => undefined;
  /** Settles once the transaction is committed or aborted here. */
  readonly ended = new Promise<void>((resolve) => (this.markEnded = resolve));

  constructor(
    readonly id: TransactionId,
    /** The snapshot every statement reads at; also the provisional time of what it writes. */
    readonly snapshot: WriteTime,
    /** Null once the transaction is prepared or over. */
    public runner: QueryRunner | null,
    readonly startedAt: number,
  ) {}

  get atClusterTime(): ClusterTimestamp {
    return this.snapshot.time;
  }

  get readOnly(): boolean {
    return this.written.size === 0;
  }

  writtenDocuments(): WrittenDocuments[] {
    return [...this.written.values()];
  }

  /** What a statement runs with: this transaction's connection, and a note of each document it writes. */
  work(): TransactionWork {
    if (this.runner === null) throw new Error('a transaction without its connection took a statement');
    return {
      manager: this.runner.manager,
      wrote: (handle: CollectionHandle, id: Buffer, shardKey: Uint8Array) => {
        const collectionUuid = handle.snapshot!.collectionUuid;
        let documents = this.written.get(handle.table);
        if (documents === undefined) {
          documents = { ns: handle.ns, collectionUuid, table: handle.table, ids: [], shardKeys: [] };
          this.written.set(handle.table, documents);
        }
        documents.ids.push(id);
        documents.shardKeys.push(Buffer.from(shardKey));
      },
    };
  }

  /** Called once the transaction is over here. */
  end(): void {
    this.markEnded();
  }

  /** Runs `step` after every step queued before it. */
  serially<T>(step: () => Promise<T>): Promise<T> {
    const run = this.queue.then(step, step);
    this.queue = run.catch(() => undefined);
    return run;
  }
}

/** The map key of a transaction. */
export function transactionKey(id: TransactionId): string {
  return `${id.lsid.id}:${id.txnNumber}`;
}
