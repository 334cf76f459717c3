import { sessionListBodySchema } from '../api/session-fields.js';
import { transactionCommandBodySchema } from '../transactions/transaction-fields.js';
import { type Operation, obj, ok } from './operation.js';

const acknowledged = obj({ ok });

/** MongoDB's session commands, as the router serves them under /v1/admin. */
export const SESSION_OPERATIONS: readonly Operation[] = [
  {
    tag: 'sessions',
    method: 'post',
    path: '/v1/admin/startSession',
    summary: 'startSession: a new logical session id',
    description:
      'Send it as `lsid: { id }` with commands; with a `txnNumber` a write is retryable. A client may also make up its own UUID, as drivers do. A session unused for `timeoutMinutes` expires.',
    response: obj({
      id: obj({ $uuid: { type: 'string', format: 'uuid' } }),
      timeoutMinutes: { type: 'number' },
      ok,
    }),
  },
  {
    tag: 'sessions',
    method: 'post',
    path: '/v1/admin/refreshSessions',
    summary: 'refreshSessions: the sessions were used now (keeps them from expiring)',
    body: sessionListBodySchema,
    response: acknowledged,
  },
  {
    tag: 'sessions',
    method: 'post',
    path: '/v1/admin/endSessions',
    summary: 'endSessions: the sessions end; their cursors are killed and their records reaped',
    body: sessionListBodySchema,
    response: acknowledged,
  },
  {
    tag: 'sessions',
    method: 'post',
    path: '/v1/admin/killSessions',
    summary: "killSessions: the sessions' cursors on this router are killed now",
    body: sessionListBodySchema,
    response: acknowledged,
  },
  {
    tag: 'sessions',
    method: 'post',
    path: '/v1/admin/commitTransaction',
    summary: 'commitTransaction: commits the transaction lsid/txnNumber names',
    description:
      'Retryable. An error labelled `UnknownTransactionCommitResult` means the outcome is unknown: send the commit again, with the `recoveryToken` of the answer through any router. `TransientTransactionError`: the transaction aborted; run it again.',
    body: transactionCommandBodySchema,
    response: obj({ ok, recoveryToken: obj({ recoveryShardId: { type: 'string' } }) }),
  },
  {
    tag: 'sessions',
    method: 'post',
    path: '/v1/admin/abortTransaction',
    summary: 'abortTransaction: aborts the transaction on every shard it reached',
    body: transactionCommandBodySchema,
    response: acknowledged,
  },
];
