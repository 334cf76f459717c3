import { z } from 'zod';
import { TesseraError } from '@tessera/core';
import { type CommandSession, lsidBodySchema, txnNumberBodySchema } from '../api/session-fields.js';

/** The fields that put a command in a transaction, as MongoDB's drivers send them. */
export const transactionBodyFields = {
  startTransaction: z
    .literal(true)
    .optional()
    .meta({ description: 'On the first command of a transaction (with `lsid`, `txnNumber` and `autocommit: false`).' }),
  autocommit: z
    .literal(false)
    .optional()
    .meta({
      description: 'false on every command of a transaction: the command is a statement of the transaction `lsid`/`txnNumber` names.',
    }),
};

export interface TransactionBody {
  startTransaction?: true | undefined;
  autocommit?: false | undefined;
}

/** A command's place in a transaction: the transaction, and whether this command starts it. */
export interface TransactionStatementOf {
  lsid: string;
  txnNumber: number;
  start: boolean;
}

/**
 * Whether a command is a transaction's statement, as MongoDB decides: `autocommit: false` with a
 * session and txnNumber. Throws `INVALID_OPTIONS` for the fields without one another, as MongoDB.
 */
export function transactionStatementOf(body: TransactionBody, session: CommandSession | undefined): TransactionStatementOf | undefined {
  if (body.autocommit === undefined) {
    if (body.startTransaction) throw new TesseraError('INVALID_OPTIONS', 'startTransaction requires autocommit: false');
    return undefined;
  }
  if (session?.txnNumber === undefined) {
    throw new TesseraError('INVALID_OPTIONS', 'a command with autocommit: false needs an lsid and a txnNumber (a transaction)', {
      details: { field: 'autocommit' },
    });
  }
  return { lsid: session.lsid.id, txnNumber: session.txnNumber, start: body.startTransaction === true };
}

/** The body of commitTransaction and abortTransaction, as MongoDB's commands. */
export const transactionCommandBodySchema = z.strictObject({
  lsid: lsidBodySchema,
  txnNumber: txnNumberBodySchema,
  autocommit: z.literal(false).meta({ description: 'false, as on every command of the transaction.' }),
  recoveryToken: z
    .strictObject({ recoveryShardId: z.string().min(1) })
    .optional()
    .meta({ description: "commitTransaction only: the first commit's recoveryToken, to finish the commit through another router." }),
});
