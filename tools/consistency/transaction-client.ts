import { randomUUID } from 'node:crypto';
import { Agent, request } from 'undici';

/** A router's answer: the HTTP status and the JSON body. */
export interface Answer {
  status: number;
  json: Record<string, unknown>;
}

/** What a transaction's attempt came to, as a driver sees it. */
export type Outcome =
  /** Committed: the commit was acknowledged. */
  | 'committed'
  /** Aborted, known: an error labelled TransientTransactionError (or any other refusal before commit). */
  | 'aborted'
  /** Unknown: the commit's answer was lost or labelled UnknownTransactionCommitResult, and retrying it did not tell. */
  | 'unknown';

/** Thrown by a statement that failed: the transaction is over (aborted). */
export class StatementFailed extends Error {
  constructor(readonly answer: Answer) {
    super(`statement failed with ${answer.status}: ${JSON.stringify(answer.json)}`);
  }
}

/**
 * One client session's transactions through routers, as a MongoDB driver runs them: each
 * transaction a new txnNumber, `startTransaction` on its first statement, commit retried on
 * `UnknownTransactionCommitResult` (through the next router, with the recovery token).
 */
export class TransactionSession {
  readonly lsid = { id: { $uuid: randomUUID() } };
  private txnNumber = 0;
  private started = false;
  /** Why the last transaction aborted: the error's codeName, or `unreachable`. */
  lastAbortReason: string | undefined;
  private router = 0;

  /** `authorization`: the `Authorization` header every statement sends (none by default). */
  constructor(
    private readonly routers: readonly string[],
    private readonly agent: Agent,
    private readonly authorization?: string,
  ) {}

  /** Runs `body` as one transaction and commits it; answers what became of it. */
  async run(body: (session: TransactionSession) => Promise<void>): Promise<Outcome> {
    this.txnNumber++;
    this.started = false;
    this.lastAbortReason = undefined;
    try {
      await body(this);
    } catch (error) {
      if (!(error instanceof StatementFailed)) throw error;
      this.lastAbortReason = reasonOf(error.answer);
      return 'aborted';
    }
    return this.commit();
  }

  /** A statement of the current transaction (a path under the router, such as `/v1/db/coll/find`). */
  async statement(path: string, command: Record<string, unknown>): Promise<Record<string, unknown>> {
    const fields = { lsid: this.lsid, txnNumber: this.txnNumber, autocommit: false, ...(this.started ? {} : { startTransaction: true }) };
    this.started = true;
    const answer = await this.call(path, { ...command, ...fields });
    if (answer.status !== 200) throw new StatementFailed(answer);
    return answer.json;
  }

  private async commit(): Promise<Outcome> {
    let recoveryToken: unknown;
    let lost = false;
    for (let attempt = 0; attempt < 20; attempt++) {
      const answer = await this.call('/v1/admin/commitTransaction', {
        lsid: this.lsid,
        txnNumber: this.txnNumber,
        autocommit: false,
        ...(recoveryToken ? { recoveryToken } : {}),
      });
      if (answer.status === 200) return 'committed';
      const labels = (answer.json.errorLabels as string[] | undefined) ?? [];
      // A refusal after an answer was lost may come from a router that never ran the transaction.
      if (answer.status !== 0 && !labels.includes('UnknownTransactionCommitResult')) {
        this.lastAbortReason = reasonOf(answer);
        return lost ? 'unknown' : 'aborted';
      }
      recoveryToken ??= (answer.json as { recoveryToken?: unknown }).recoveryToken;
      if (answer.status === 0) lost = true;
      await new Promise((resolve) => setTimeout(resolve, 100 * Math.min(attempt + 1, 10)));
    }
    return 'unknown';
  }

  /**
   * A request to the session's router; status 0 when the router could not be reached, and the
   * session goes on with the next router.
   */
  private async call(path: string, body: Record<string, unknown>): Promise<Answer> {
    const answer = await this.send(path, body);
    if (answer.status === 0) this.router = (this.router + 1) % this.routers.length;
    return answer;
  }

  private async send(path: string, body: Record<string, unknown>): Promise<Answer> {
    try {
      const response = await request(`${this.routers[this.router]}${path}`, {
        dispatcher: this.agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.authorization === undefined ? {} : { authorization: this.authorization }) },
        body: JSON.stringify(body),
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      });
      const text = await response.body.text();
      return { status: response.statusCode, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
    } catch (error) {
      return { status: 0, json: { error: (error as Error).message } };
    }
  }
}

function reasonOf(answer: Answer): string {
  return answer.status === 0 ? 'unreachable' : String(answer.json.codeName ?? answer.status);
}
