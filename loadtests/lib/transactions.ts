// The transactions workload: Jepsen's bank (as tools/consistency/bank-workload.ts runs it) under
// k6. Setup opens ACCOUNTS accounts { _id: i, balance: OPENING_BALANCE, transfers: 0 } in a
// collection hashed on _id and pre-split over every shard. Each virtual user holds one logical
// session (an id it makes up) and numbers its transactions with an increasing txnNumber, as a
// driver does. Each iteration is one transfer between two random accounts (on two shards unless
// both hash to one) in one transaction: read the payer's balance, `$inc` it by -amount, `$inc`
// the payee by +amount, commit. A transfer that would overdraw aborts instead. Money only moves,
// so teardown must find the total it started with whatever the transactions did; any difference
// is money made or destroyed by a transaction applied in part.

import type { RandomSource } from './keys.ts';
import type { WorkloadOptions } from './options.ts';
import { type LogicalSessionId, newVuSession } from './retryable-writes.ts';
import { type Sequence, type Step, sendAll } from './steps.ts';
import { type RouterRequest, pathOf } from './workloads.ts';

/** A transfer moves from 1 to MAX_TRANSFER. */
export const MAX_TRANSFER = 5;
/** commitTransaction is sent again at most this many times on an unknown outcome; after that the transfer's outcome stays unknown. */
export const MAX_COMMIT_RETRIES = 3;
/**
 * The pause before a transaction runs again is attempt × this, scaled by a random factor from 0.5
 * to 1.5: the loser of a write conflict that came straight back would meet the winner's locks
 * again, and two losers of one conflict would meet each other.
 */
export const TXN_RETRY_BACKOFF_MS = 10;
/** The pause before commitTransaction is sent again is attempt × this: the coordinator needs time to become reachable. */
export const COMMIT_RETRY_BACKOFF_MS = 100;
/** Documents per batch of teardown's read of the balances. */
export const BALANCE_BATCH = 1000;

export const COMMIT_PATH = '/v1/admin/commitTransaction';
export const ABORT_PATH = '/v1/admin/abortTransaction';

/** A virtual user's session: made up by the user, one per VU for the whole run. */
export interface TxnSession {
  vuId: number;
  lsid: LogicalSessionId;
  /**
   * The txnNumber of the session's latest transaction. Every attempt of every transfer takes the
   * next one, so it only ever increases on the session (a lower one would be refused as
   * TransactionTooOld, and starting a transaction under a number already used is refused too).
   */
  txnNumber: number;
}

export function newTxnSession(vuId: number, random: RandomSource): TxnSession {
  return { ...newVuSession(vuId, random), txnNumber: 0 };
}

export interface Transfer {
  from: number;
  to: number;
  amount: number;
}

/** Two distinct random accounts of `accounts` (2 at least) and an amount from 1 to MAX_TRANSFER. */
export function pickTransfer(accounts: number, random: RandomSource): Transfer {
  const from = Math.floor(random() * accounts);
  const to = (from + 1 + Math.floor(random() * (accounts - 1))) % accounts;
  return { from, to, amount: 1 + Math.floor(random() * MAX_TRANSFER) };
}

/**
 * The router of a VU's transfer. Every statement, commit and abort of a transaction goes through
 * the router that started it, the only one that knows it; its retries go there too, so that a
 * retry's first statement ends the attempt before it (a newer txnNumber on the session aborts the
 * older transaction on that router). Transfers take turns over the routers by VU and iteration.
 */
export function routerOfTransfer(routerUrls: readonly string[], vuId: number, iteration: number): string {
  return routerUrls[(vuId + iteration) % routerUrls.length] as string;
}

/** An account as setup opens it. `transfers` counts the transfers that touched it, so teardown can count the committed ones from the data. */
export function accountDocument(id: number, openingBalance: number): { _id: number; balance: number; transfers: number } {
  return { _id: id, balance: openingBalance, transfers: 0 };
}

/** Setup's inserts of the accounts, BATCH to a request (`sendAll` sends them and stops at the first failure). */
export function accountBatches(options: WorkloadOptions): RouterRequest[] {
  const requests: RouterRequest[] = [];
  for (let start = 0; start < options.accounts; start += options.batch) {
    const documents = [];
    for (let id = start; id < Math.min(options.accounts, start + options.batch); id++)
      documents.push(accountDocument(id, options.openingBalance));
    requests.push({ name: 'insert', method: 'POST', path: pathOf(options.ns, 'insert'), body: { documents, ordered: false } });
  }
  return requests;
}

/**
 * Setup's part of the bank: opens the accounts, then counts them through every router of
 * ROUTER_URLS. A transaction reads at its router's ClusterTime when it starts, and a router that
 * has not talked to the shards since the inserts (any but the one that made them) may be behind
 * them: its first transactions would read a snapshot from before the collection or its accounts
 * existed. The count asks every shard, and their answers carry the router's ClusterTime past the
 * inserts. Answers the accounts opened; throws when a router does not count every one.
 */
export function* openAccounts(options: WorkloadOptions): Sequence<number> {
  yield* sendAll(accountBatches(options));
  for (const routerUrl of options.routerUrls) {
    const counted = yield { kind: 'router', method: 'POST', path: pathOf(options.ns, 'count'), body: { filter: {} }, routerUrl };
    const n = asAnswer(counted.body).n;
    if (counted.status !== 200 || n !== options.accounts)
      throw new Error(`${routerUrl} counts ${String(n)} of ${options.accounts} accounts in ${options.ns} (HTTP ${counted.status})`);
  }
  return options.accounts;
}

/** The requests of a transfer, also their latency and error tags. */
export type TxnOp = 'find' | 'debit' | 'credit' | 'commitTransaction' | 'abortTransaction';

/** The statements of a transfer, before the commit. */
export type TransferStatement = 'find' | 'debit' | 'credit';

export interface RecoveryToken {
  recoveryShardId: string;
}

/** The reason a request that got no answer (status 0: connection refused, reset, timed out) gives. */
export const NO_ANSWER = 'unreachable';
/** The reason of a transfer's explicit abort: the payer's balance is below the amount. */
export const OVERDRAW = 'overdraw';

/** What an answer inside a transaction tells the client to do next. */
export type TxnVerdict =
  /** Go on; the find's `balance`, a commit's `recoveryToken`. */
  | { kind: 'ok'; balance?: number; recoveryToken?: RecoveryToken }
  /** TransientTransactionError: the transaction is aborted; run it again from the start under a new txnNumber. */
  | { kind: 'transient'; reason: string }
  /** UnknownTransactionCommitResult: the commit may or may not have happened; send commitTransaction again, same txnNumber. */
  | { kind: 'unknownCommitResult'; reason: string; recoveryToken?: RecoveryToken }
  /** Anything else: not a part of the protocol; the transfer stops and the request counts as an error. */
  | { kind: 'failed'; reason: string };

type Answer = Record<string, unknown>;

function asAnswer(body: unknown): Answer {
  return typeof body === 'object' && body !== null ? (body as Answer) : {};
}

function labelsOf(answer: Answer): string[] {
  return Array.isArray(answer.errorLabels) ? answer.errorLabels.filter((label): label is string => typeof label === 'string') : [];
}

function recoveryTokenOf(answer: Answer): RecoveryToken | undefined {
  const token = answer.recoveryToken;
  return typeof token === 'object' && token !== null && typeof (token as RecoveryToken).recoveryShardId === 'string'
    ? { recoveryShardId: (token as RecoveryToken).recoveryShardId }
    : undefined;
}

/**
 * A refusal (a status other than 200) inside a transaction. Its error labels, never its message,
 * say what the client may do; `UnknownTransactionCommitResult` means something only to a commit.
 */
function judgeRefusal(status: number, answer: Answer, isCommit: boolean): TxnVerdict {
  const codeName = typeof answer.codeName === 'string' ? answer.codeName : undefined;
  const labels = labelsOf(answer);
  if (isCommit && labels.includes('UnknownTransactionCommitResult')) {
    const recoveryToken = recoveryTokenOf(answer);
    return { kind: 'unknownCommitResult', reason: codeName ?? `HTTP ${status}`, ...(recoveryToken === undefined ? {} : { recoveryToken }) };
  }
  if (labels.includes('TransientTransactionError')) return { kind: 'transient', reason: codeName ?? `HTTP ${status}` };
  return { kind: 'failed', reason: `HTTP ${status}${codeName === undefined ? '' : ` ${codeName}`}` };
}

/**
 * A statement's answer. No answer at all is a transient error, as MongoDB's drivers label a
 * network error inside a transaction: the statement may have run, but nothing of the transaction
 * is committed, so running all of it again under a new txnNumber is safe. A 200 must be what the
 * statement asked for: the find reads the payer's numeric balance, an `$inc` matches and changes
 * exactly its one account.
 */
export function judgeStatementAnswer(statement: TransferStatement, status: number, body: unknown): TxnVerdict {
  if (status === 0) return { kind: 'transient', reason: NO_ANSWER };
  const answer = asAnswer(body);
  if (status !== 200) return judgeRefusal(status, answer, false);
  if (statement === 'find') {
    const batch = asAnswer(answer.cursor).firstBatch;
    if (!Array.isArray(batch)) return { kind: 'failed', reason: 'no cursor' };
    if (batch.length !== 1) return { kind: 'failed', reason: `found ${batch.length} accounts of 1` };
    const account = asAnswer(batch[0]);
    return typeof account.balance === 'number'
      ? { kind: 'ok', balance: account.balance }
      : { kind: 'failed', reason: 'account without a balance' };
  }
  return answer.matchedCount === 1 && answer.modifiedCount === 1
    ? { kind: 'ok' }
    : { kind: 'failed', reason: `matched ${String(answer.matchedCount)}, modified ${String(answer.modifiedCount)} of 1` };
}

/** commitTransaction's answer. No answer leaves the outcome unknown: the commit may have been decided before the connection dropped. */
export function judgeCommitAnswer(status: number, body: unknown): TxnVerdict {
  if (status === 0) return { kind: 'unknownCommitResult', reason: NO_ANSWER };
  const answer = asAnswer(body);
  if (status !== 200) return judgeRefusal(status, answer, true);
  const recoveryToken = recoveryTokenOf(answer);
  return recoveryToken === undefined ? { kind: 'ok' } : { kind: 'ok', recoveryToken };
}

/**
 * abortTransaction's answer. NoSuchTransaction is what an abort wants: the transaction is not in
 * progress, nothing of it will commit; so is any refusal labelled TransientTransactionError.
 */
export function judgeAbortAnswer(status: number, body: unknown): TxnVerdict {
  const answer = asAnswer(body);
  if (status === 200 || (status !== 0 && answer.codeName === 'NoSuchTransaction')) return { kind: 'ok' };
  return status === 0 ? { kind: 'failed', reason: NO_ANSWER } : judgeRefusal(status, answer, false);
}

/** How a transfer ended. */
export type TransferEnd =
  /** A commit was acknowledged. */
  | 'committed'
  /** The payer's balance was below the amount: aborted on purpose. */
  | 'overdrawn'
  /** MAX_TXN_RETRIES + 1 attempts all ended in a TransientTransactionError. */
  | 'gaveUp'
  /** An answer outside the protocol (counted in tessera_errors). */
  | 'failed'
  /** The commit's outcome stayed unknown after MAX_COMMIT_RETRIES retries (counted in tessera_errors). */
  | 'unknown';

/** One request of a transfer, as tessera_errors counts it: refusals the protocol expects (transient, unknown commit result) are not errors. */
export interface TxnSend {
  op: TxnOp;
  ok: boolean;
  problem?: string;
}

export interface TransferOutcome {
  transfer: Transfer;
  end: TransferEnd;
  /** Why each attempt that did not commit was aborted, in order: the error's codeName, `unreachable` or `overdraw`. */
  aborts: string[];
  /** Times the whole transaction ran again under a new txnNumber. */
  txnRetries: number;
  /** Times commitTransaction was sent again under the same txnNumber. */
  commitRetries: number;
  /** From the first commitTransaction to the answer that it committed, retries included; null unless it committed. */
  commitMs: number | null;
  sends: TxnSend[];
}

/** How one attempt ended: `aborted` (a transient error: run the transaction again) or the transfer's end. */
type AttemptEnd = 'aborted' | Exclude<TransferEnd, 'gaveUp'>;

interface Attempt {
  ns: string;
  /** The fields every command of the attempt carries. */
  txn: { lsid: LogicalSessionId; txnNumber: number; autocommit: false };
  transfer: Transfer;
  routerUrl: string;
  nowMs: () => number;
  outcome: TransferOutcome;
}

function stepOf(attempt: Attempt, op: TxnOp, path: string, command: Answer): Step {
  return { kind: 'router', method: 'POST', path, body: { ...command, ...attempt.txn }, routerUrl: attempt.routerUrl, name: op };
}

function record(outcome: TransferOutcome, op: TxnOp, verdict: TxnVerdict): void {
  outcome.sends.push(verdict.kind === 'failed' ? { op, ok: false, problem: verdict.reason } : { op, ok: true });
}

/**
 * Best effort to end an attempt that cannot go on: after a statement with no answer, or with an
 * answer the transfer cannot go on from, the router may still hold the transaction and its locks.
 * Its answer is not judged: a transaction it could not
 * abort is aborted by the next attempt's first statement, or by the shards after
 * transactionLifetimeLimitSeconds.
 */
function* abandon(attempt: Attempt): Sequence<void> {
  yield stepOf(attempt, 'abortTransaction', ABORT_PATH, {});
}

function* statement(attempt: Attempt, op: TransferStatement, command: Answer): Sequence<TxnVerdict> {
  const path = pathOf(attempt.ns, op === 'find' ? 'find' : 'update');
  const answer = yield stepOf(attempt, op, path, command);
  const verdict = judgeStatementAnswer(op, answer.status, answer.body);
  record(attempt.outcome, op, verdict);
  if (verdict.kind === 'transient') attempt.outcome.aborts.push(verdict.reason);
  // A refused statement aborted the transaction on the router already; any other may have left it open.
  if ((verdict.kind === 'transient' && verdict.reason === NO_ANSWER) || verdict.kind === 'failed') yield* abandon(attempt);
  return verdict;
}

function* balanceMove(attempt: Attempt, op: 'debit' | 'credit', account: number, delta: number): Sequence<TxnVerdict> {
  return yield* statement(attempt, op, { updates: [{ q: { _id: account }, u: { $inc: { balance: delta, transfers: 1 } } }] });
}

/**
 * Commits, sending commitTransaction again under the same txnNumber while the outcome is unknown,
 * with the recovery token when an answer gave one (the router that ran the transaction answers
 * from it; another would need the token).
 */
function* commit(attempt: Attempt): Sequence<AttemptEnd> {
  const { outcome } = attempt;
  const startedMs = attempt.nowMs();
  let recoveryToken: RecoveryToken | undefined;
  for (let retry = 0; ; retry++) {
    if (retry > 0) {
      outcome.commitRetries++;
      yield { kind: 'sleep', ms: COMMIT_RETRY_BACKOFF_MS * retry };
    }
    const answer = yield stepOf(attempt, 'commitTransaction', COMMIT_PATH, recoveryToken === undefined ? {} : { recoveryToken });
    const verdict = judgeCommitAnswer(answer.status, answer.body);
    switch (verdict.kind) {
      case 'ok':
        record(outcome, 'commitTransaction', verdict);
        outcome.commitMs = attempt.nowMs() - startedMs;
        return 'committed';
      case 'transient':
        record(outcome, 'commitTransaction', verdict);
        outcome.aborts.push(verdict.reason);
        return 'aborted';
      case 'failed':
        record(outcome, 'commitTransaction', verdict);
        return 'failed';
      case 'unknownCommitResult':
        if (verdict.recoveryToken !== undefined) recoveryToken = verdict.recoveryToken;
        if (retry >= MAX_COMMIT_RETRIES) {
          record(outcome, 'commitTransaction', {
            kind: 'failed',
            reason: `outcome unknown after ${retry + 1} commits (${verdict.reason})`,
          });
          return 'unknown';
        }
        record(outcome, 'commitTransaction', verdict);
        break;
    }
  }
}

/** One attempt of a transfer's transaction under the session's current txnNumber. */
function* attemptTransfer(attempt: Attempt): Sequence<AttemptEnd> {
  const { transfer } = attempt;
  // The first statement starts the transaction: its snapshot is the router's ClusterTime now.
  const read = yield* statement(attempt, 'find', { filter: { _id: transfer.from }, startTransaction: true });
  if (read.kind !== 'ok') return read.kind === 'transient' ? 'aborted' : 'failed';
  if ((read.balance ?? 0) < transfer.amount) {
    const answer = yield stepOf(attempt, 'abortTransaction', ABORT_PATH, {});
    const verdict = judgeAbortAnswer(answer.status, answer.body);
    record(attempt.outcome, 'abortTransaction', verdict);
    if (verdict.kind === 'failed') return 'failed';
    attempt.outcome.aborts.push(OVERDRAW);
    return 'overdrawn';
  }
  for (const [op, account, delta] of [
    ['debit', transfer.from, -transfer.amount],
    ['credit', transfer.to, transfer.amount],
  ] as const) {
    const moved = yield* balanceMove(attempt, op, account, delta);
    if (moved.kind !== 'ok') return moved.kind === 'transient' ? 'aborted' : 'failed';
  }
  return yield* commit(attempt);
}

/**
 * One iteration of a VU: one transfer between two random accounts, through one router. A
 * TransientTransactionError runs the whole transaction again under a new txnNumber, after a
 * pause, up to `options.maxTxnRetries` times; then the transfer is given up (nothing of it
 * committed). The session's txnNumber moves on by one per attempt.
 */
export function* transferIteration(
  options: WorkloadOptions,
  session: TxnSession,
  iteration: number,
  random: RandomSource,
  nowMs: () => number,
): Sequence<TransferOutcome> {
  const transfer = pickTransfer(options.accounts, random);
  const routerUrl = routerOfTransfer(options.routerUrls, session.vuId, iteration);
  const outcome: TransferOutcome = { transfer, end: 'gaveUp', aborts: [], txnRetries: 0, commitRetries: 0, commitMs: null, sends: [] };
  for (let run = 0; run <= options.maxTxnRetries; run++) {
    if (run > 0) {
      outcome.txnRetries++;
      yield { kind: 'sleep', ms: Math.round(TXN_RETRY_BACKOFF_MS * run * (0.5 + random())) };
    }
    session.txnNumber++;
    const end = yield* attemptTransfer({
      ns: options.ns,
      txn: { lsid: session.lsid, txnNumber: session.txnNumber, autocommit: false },
      transfer,
      routerUrl,
      nowMs,
      outcome,
    });
    if (end !== 'aborted') {
      outcome.end = end;
      return outcome;
    }
  }
  return outcome;
}

/** What teardown finds. */
export interface BalanceCheck {
  /** Accounts read. */
  accounts: number;
  /** The sum of their balances, and what it must be: ACCOUNTS × OPENING_BALANCE. */
  total: number;
  expected: number;
  /** total - expected: money made (above 0) or destroyed (below) by a transfer applied in part, or an account lost. Must be 0. */
  drift: number;
  /**
   * Committed transfers as the data has them: each adds 1 to `transfers` of both its accounts, so
   * half the sum. A half left over is a transfer applied on one side only.
   */
  transfersCommitted: number;
}

function cursorOf(status: number, body: unknown, what: string): { id: string; batch: Answer[] } {
  const cursor = asAnswer(asAnswer(body).cursor);
  const batch = Array.isArray(cursor.firstBatch) ? cursor.firstBatch : cursor.nextBatch;
  if (status !== 200 || !Array.isArray(batch)) throw new Error(`${what} answered ${status}: ${JSON.stringify(body)}`);
  return { id: String(cursor.id ?? '0'), batch: batch.map(asAnswer) };
}

/**
 * Teardown's check: every balance through the router. A count through the router first: it asks
 * every shard, and their answers move the router's ClusterTime past every commit they stamped,
 * so the read that follows is at or after every acknowledged commit, whichever router
 * acknowledged it. Then every balance at one ClusterTime (readConcern snapshot): a transfer
 * whose commit has reached one shard and not yet the other is seen on both or on neither, so a
 * correct cluster shows the opening total at any moment; a plain read could catch it half
 * delivered.
 */
export function* checkBalances(options: WorkloadOptions): Sequence<BalanceCheck> {
  const counted = yield { kind: 'router', method: 'POST', path: pathOf(options.ns, 'count'), body: { filter: {} } };
  if (counted.status !== 200) throw new Error(`count on ${options.ns} answered ${counted.status}: ${JSON.stringify(counted.body)}`);
  const found = yield {
    kind: 'router',
    method: 'POST',
    path: pathOf(options.ns, 'find'),
    body: { filter: {}, projection: { balance: 1, transfers: 1 }, batchSize: BALANCE_BATCH, readConcern: { level: 'snapshot' } },
  };
  let cursor = cursorOf(found.status, found.body, `find on ${options.ns}`);
  let accounts = 0;
  let total = 0;
  let transfers = 0;
  for (;;) {
    for (const account of cursor.batch) {
      if (typeof account.balance !== 'number' || typeof account.transfers !== 'number')
        throw new Error(`account ${JSON.stringify(account._id)} of ${options.ns} has no numeric balance or transfers`);
      accounts++;
      total += account.balance;
      transfers += account.transfers;
    }
    if (cursor.id === '0') break;
    const next = yield { kind: 'router', method: 'POST', path: `/v1/cursors/${cursor.id}/next`, body: { batchSize: BALANCE_BATCH } };
    cursor = cursorOf(next.status, next.body, `next batch of cursor ${cursor.id}`);
  }
  const expected = options.accounts * options.openingBalance;
  return { accounts, total, expected, drift: total - expected, transfersCommitted: transfers / 2 };
}

/** The check as teardown's Gauges (part of REPORT_METRICS, so the summary picks them up). */
export function balanceCheckMetrics(check: BalanceCheck): {
  tessera_accounts: number;
  tessera_balance_total: number;
  tessera_balance_drift: number;
  tessera_transfers_committed: number;
} {
  return {
    tessera_accounts: check.accounts,
    tessera_balance_total: check.total,
    tessera_balance_drift: check.drift,
    tessera_transfers_committed: check.transfersCommitted,
  };
}

export function formatBalanceCheck(ns: string, check: BalanceCheck): string {
  return `tessera: ${ns}: ${check.accounts} accounts hold ${check.total} of ${check.expected} (drift ${check.drift}); ${check.transfersCommitted} transfers committed in the data`;
}
