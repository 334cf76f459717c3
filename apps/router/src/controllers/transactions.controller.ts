import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { parseWith } from '@tessera/platform';
import { transactionCommandBodySchema } from '../transactions/transaction-fields.js';
import { sessionOf } from '../api/session-fields.js';
import { RouterSessions } from '../sessions/router-sessions.service.js';
import { type CommitAnswer, TransactionRouter } from '../transactions/transaction-router.service.js';
import { transactionStatementOf } from '../transactions/transaction-fields.js';

/** MongoDB's commitTransaction and abortTransaction under `/v1/admin`. */
@Controller('v1/admin')
export class TransactionsController {
  constructor(
    private readonly sessions: RouterSessions,
    private readonly transactions: TransactionRouter,
  ) {}

  /** Commits; retryable, and with the recoveryToken of a first attempt any router can finish it. */
  @Post('commitTransaction')
  @HttpCode(200)
  commitTransaction(@Body() body: unknown): Promise<CommitAnswer> {
    const command = parseWith(transactionCommandBodySchema, body, 'commitTransaction request');
    const of = transactionStatementOf(command, this.sessions.use(command))!;
    return this.transactions.commit(of, command.recoveryToken?.recoveryShardId);
  }

  @Post('abortTransaction')
  @HttpCode(200)
  abortTransaction(@Body() body: unknown): Promise<{ ok: 1 }> {
    const command = parseWith(transactionCommandBodySchema, body, 'abortTransaction request');
    return this.transactions.abort(transactionStatementOf(command, sessionOf(command))!);
  }
}
