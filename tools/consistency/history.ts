/**
 * A history of transactions as a workload records them, for the checkers: each transaction with
 * its outcome as the client saw it and its micro-operations in order. `ok`: committed; `fail`:
 * known not to have committed (aborted); `info`: unknown (the client lost the answer), so it may
 * have committed or not.
 */
export type TxnStatus = 'ok' | 'fail' | 'info';

/** A list-append micro-operation: append `value` to the list at `key`, or read the list (its value as read; unknown until read). */
export type ListOp = { f: 'append'; key: string; value: number } | { f: 'r'; key: string; value: readonly number[] | null };

export interface ListTxn {
  /** Unique in the history. */
  id: number;
  status: TxnStatus;
  ops: readonly ListOp[];
}

/** One anomaly found, with the transactions involved and, for a cycle, its edges in order. */
export interface Anomaly {
  type: AnomalyType;
  message: string;
  txns: number[];
  cycle?: DependencyEdge[];
}

/**
 * Adya's anomalies (G0 write cycle, G1a aborted read, G1b intermediate read, G1c circular
 * information flow, G-single read skew, G2-item anti-dependency cycle), and what makes a
 * history unreadable: reads of one key that no single order of its appends explains, or a value
 * read twice in one list.
 */
export type AnomalyType = 'G0' | 'G1a' | 'G1b' | 'G1c' | 'G-single' | 'G2-item' | 'incompatible-order' | 'duplicate-elements';

/** ww: `to` appended the value after `from`'s; wr: `to` read `from`'s append as the last; rw: `from` read the list before `to`'s append. */
export type DependencyKind = 'ww' | 'wr' | 'rw';

export interface DependencyEdge {
  from: number;
  to: number;
  kind: DependencyKind;
  key: string;
  value: number;
}
