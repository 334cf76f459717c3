import type { EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';
import type { WithoutShardKeyPhase } from '@tessera/protocol';

/**
 * A statement's answer as the session's history keeps it, enough to answer a retry without
 * running it again (JSON: it is stored as jsonb).
 */
export type StatementResult =
  /** An inserted document. */
  | { op: 'insert' }
  /** An update statement: matched and modified counts, and the upserted `_id` (Extended JSON). */
  | { op: 'update'; n: number; nModified: number; upserted?: unknown }
  /** A delete statement. */
  | { op: 'delete'; n: number }
  /** A findAndModify; its `value` comes from the session's image, when `image` names one. */
  | { op: 'findAndModify'; lastErrorObject: { n: number; updatedExisting: boolean; upserted?: unknown }; image?: ImageKind };

export type ImageKind = 'preImage' | 'postImage';

/** An executed statement to record: its index in the command, the written document's shard key when known, its answer. */
export interface ExecutedStatement {
  index: number;
  shardKey: Uint8Array | undefined;
  result: StatementResult;
}

/**
 * The seam between the write paths and a retryable write's session. A write path asks, for each
 * statement before running it, whether it already executed (then it answers the recorded result
 * and does not run it), and records what it executed inside the transaction of the write itself,
 * so that the write and its record commit together or not at all. A failed statement is not
 * recorded: a retry runs it again. Non-retryable writes have no history.
 */
export interface StatementHistory {
  /** The recorded result of the statement at `index` of this command, when it already executed. */
  executed(index: number): StatementResult | undefined;
  /** As `executed`, without counting the statement as answered from history. */
  ran(index: number): StatementResult | undefined;
  /** The document a retried findAndModify answers with (before projection). */
  image(): { kind: ImageKind; document: unknown } | undefined;
  /** Records executed statements (and a findAndModify's image) in the write's transaction. */
  record(manager: EntityManager, statements: readonly ExecutedStatement[], image?: { kind: ImageKind; document: unknown }): Promise<void>;
  /**
   * The SQL recording `statements` inside the write's own statement, its parameters numbered
   * from `$first`: CTEs to add to the statement's, and a check to select, which raises (rolling
   * the statement back) when the record could not be written. Once the statement succeeded,
   * the write path calls `recorded` with the same statements.
   */
  recording(first: number, statements: readonly ExecutedStatement[]): StatementRecording;
  /** The statements `recording` recorded are stored. */
  recorded(statements: readonly ExecutedStatement[]): void;
}

/** See `StatementHistory.recording`. */
export interface StatementRecording {
  /** Names the text of `ctes` and `check`, for the name of a prepared statement that includes them. */
  shape: string;
  ctes: string;
  check: string;
  values: unknown[];
}

/**
 * `result` as the recorded answer of a statement of kind `op`. A statement recorded as another
 * kind means the client reused a stmtId for a different statement under one txnNumber.
 */
export function recordedAs<O extends StatementResult['op']>(
  result: StatementResult,
  op: O,
  index: number,
): Extract<StatementResult, { op: O }> {
  if (result.op !== op) {
    throw new TesseraError(
      'INVALID_OPTIONS',
      `statement ${index} of this retryable write already executed as a ${result.op}, not a ${op}: a stmtId names one statement`,
      { details: { index } },
    );
  }
  return result as Extract<StatementResult, { op: O }>;
}

/**
 * The write paths' `work` as a phase of a write without shard key (the command's
 * `withoutShardKey`; see the protocol), for a command of one statement:
 *
 * - `probe`: a statement this shard already ran answers from history; otherwise nothing runs and
 *   the answer is `none()`. The router probes every shard before it looks for a document, so a
 *   retry finds where the first attempt wrote instead of writing a second document.
 * - `write`: the statement runs on the one document the router picked; if that document no
 *   longer matches, nothing is recorded, so the router's next pick can run under the same stmtId.
 */
export function inPhase<T>(
  phase: WithoutShardKeyPhase | undefined,
  none: () => T,
  work: (history: StatementHistory | undefined) => Promise<T>,
): (history: StatementHistory | undefined) => Promise<T> {
  if (phase === undefined) return work;
  if (phase === 'probe') return async (history) => (history?.ran(0) === undefined ? none() : work(history));
  return (history) => work(history === undefined ? undefined : changesOnly(history));
}

/** `history` recording only the statements that changed a document. */
function changesOnly(history: StatementHistory): StatementHistory {
  return {
    executed: (index) => history.executed(index),
    ran: (index) => history.ran(index),
    image: () => history.image(),
    record: (manager, statements, image) => history.record(manager, statements.filter(changedSomething), image),
    recording: (first, statements) => history.recording(first, statements.filter(changedSomething)),
    recorded: (statements) => history.recorded(statements.filter(changedSomething)),
  };
}

function changedSomething({ result }: ExecutedStatement): boolean {
  switch (result.op) {
    case 'insert':
      return true;
    case 'update':
      return result.n > 0 || result.upserted !== undefined;
    case 'delete':
      return result.n > 0;
    case 'findAndModify':
      return result.lastErrorObject.n > 0;
  }
}
