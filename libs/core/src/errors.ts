/**
 * The one error type of Tessera. Every failure that crosses a module or a process boundary is a
 * `TesseraError` with a code from a closed set; callers branch on `code`, never on message text.
 * Each transport (HTTP, GraphQL, socket.io) maps codes with one exhaustive switch.
 */

/**
 * The closed set of error codes. Each entry names MongoDB's numeric code and codeName where
 * MongoDB has one, so clients that know MongoDB recognise them, and whether the error is
 * retryable by default (the operation may succeed if sent again unchanged).
 */
export const ERROR_CODES = {
  BAD_VALUE: { code: 2, codeName: 'BadValue', retryable: false },
  FAILED_TO_PARSE: { code: 9, codeName: 'FailedToParse', retryable: false },
  /** No identity, or one that cannot be verified: MongoDB answers "requires authentication" with this code. */
  UNAUTHORIZED: { code: 13, codeName: 'Unauthorized', retryable: false },
  /** A verified identity without the privilege the call needs (HTTP 403, MongoDB's same code). */
  FORBIDDEN: { code: 13, codeName: 'Unauthorized', retryable: false },
  /** A sign-in with a wrong user, password or key. */
  AUTHENTICATION_FAILED: { code: 18, codeName: 'AuthenticationFailed', retryable: false },
  ILLEGAL_OPERATION: { code: 20, codeName: 'IllegalOperation', retryable: false },
  NAMESPACE_NOT_FOUND: { code: 26, codeName: 'NamespaceNotFound', retryable: false },
  CURSOR_NOT_FOUND: { code: 43, codeName: 'CursorNotFound', retryable: false },
  NAMESPACE_EXISTS: { code: 48, codeName: 'NamespaceExists', retryable: false },
  SHARD_NOT_FOUND: { code: 70, codeName: 'ShardNotFound', retryable: false },
  INVALID_OPTIONS: { code: 72, codeName: 'InvalidOptions', retryable: false },
  INVALID_NAMESPACE: { code: 73, codeName: 'InvalidNamespace', retryable: false },
  NOT_FOUND: { code: 211, codeName: 'KeyNotFound', retryable: false },
  HOST_UNREACHABLE: { code: 6, codeName: 'HostUnreachable', retryable: true },
  NETWORK_TIMEOUT: { code: 89, codeName: 'NetworkTimeout', retryable: true },
  SHUTDOWN_IN_PROGRESS: { code: 91, codeName: 'ShutdownInProgress', retryable: true },
  LOCK_BUSY: { code: 46, codeName: 'LockBusy', retryable: true },
  CONFLICTING_OPERATION: { code: 117, codeName: 'ConflictingOperationInProgress', retryable: true },
  NOT_LEADER: { code: 10107, codeName: 'NotWritablePrimary', retryable: true },
  STALE_CONFIG: { code: 13388, codeName: 'StaleConfig', retryable: true },
  STALE_DB_VERSION: { code: 249, codeName: 'StaleDbVersion', retryable: true },
  STALE_EPOCH: { code: 150, codeName: 'StaleEpoch', retryable: true },
  STALE_CHUNK_HISTORY: { code: 339, codeName: 'StaleChunkHistory', retryable: false },
  SHARD_KEY_NOT_FOUND: { code: 61, codeName: 'ShardKeyNotFound', retryable: false },
  IMMUTABLE_FIELD: { code: 66, codeName: 'ImmutableField', retryable: false },
  TYPE_MISMATCH: { code: 14, codeName: 'TypeMismatch', retryable: false },
  CANNOT_CREATE_INDEX: { code: 67, codeName: 'CannotCreateIndex', retryable: false },
  DOLLAR_PREFIXED_FIELD_NAME: { code: 52, codeName: 'DollarPrefixedFieldName', retryable: false },
  CHUNK_TOO_BIG: { code: 10000, codeName: 'ChunkTooBig', retryable: false },
  EXCEEDED_TIME_LIMIT: { code: 262, codeName: 'ExceededTimeLimit', retryable: true },
  /**
   * A caller past its rate limit (HTTP 429 with Retry-After). MongoDB has no code of its own for
   * it, so it answers as a resource exhausted for now; listed before TEMPORARILY_UNAVAILABLE so
   * that the name maps back to that one.
   */
  RATE_LIMITED: { code: 365, codeName: 'TemporarilyUnavailable', retryable: true },
  /** A resource is exhausted for now (MongoDB 7's code for it); retrying later may succeed. */
  TEMPORARILY_UNAVAILABLE: { code: 365, codeName: 'TemporarilyUnavailable', retryable: true },
  MAX_TIME_MS_EXPIRED: { code: 50, codeName: 'MaxTimeMSExpired', retryable: false },
  DUPLICATE_KEY: { code: 11000, codeName: 'DuplicateKey', retryable: false },
  DOCUMENT_TOO_LARGE: { code: 10334, codeName: 'BSONObjectTooLarge', retryable: false },
  NO_SUCH_TRANSACTION: { code: 251, codeName: 'NoSuchTransaction', retryable: false },
  TRANSACTION_TOO_OLD: { code: 225, codeName: 'TransactionTooOld', retryable: false },
  INCOMPLETE_TRANSACTION_HISTORY: { code: 217, codeName: 'IncompleteTransactionHistory', retryable: false },
  CLUSTER_TIME_FAILS_RATE_LIMITER: { code: 209, codeName: 'ClusterTimeFailsRateLimiter', retryable: false },
  TIME_PROOF_MISMATCH: { code: 293, codeName: 'TimeProofMismatch', retryable: false },
  SNAPSHOT_TOO_OLD: { code: 239, codeName: 'SnapshotTooOld', retryable: false },
  SNAPSHOT_UNAVAILABLE: { code: 246, codeName: 'SnapshotUnavailable', retryable: false },
  WRITE_CONFLICT: { code: 112, codeName: 'WriteConflict', retryable: false },
  LOCK_TIMEOUT: { code: 24, codeName: 'LockTimeout', retryable: false },
  PREPARED_TRANSACTION_IN_PROGRESS: { code: 256, codeName: 'PreparedTransactionInProgress', retryable: false },
  TRANSACTION_EXCEEDED_LIFETIME_LIMIT: { code: 290, codeName: 'TransactionExceededLifetimeLimitSeconds', retryable: false },
  WOULD_CHANGE_OWNING_SHARD: { code: 283, codeName: 'WouldChangeOwningShard', retryable: false },
  PIPELINE_STAGE_SHAPE: { code: 40323, codeName: 'Location40323', retryable: false },
  UNRECOGNIZED_PIPELINE_STAGE: { code: 40324, codeName: 'Location40324', retryable: false },
  STAGE_NOT_LAST: { code: 40601, codeName: 'Location40601', retryable: false },
  MERGE_STAGE_NO_MATCHING_DOCUMENT: { code: 13113, codeName: 'MergeStageNoMatchingDocument', retryable: false },
  OPERATION_NOT_SUPPORTED_IN_TRANSACTION: { code: 263, codeName: 'OperationNotSupportedInTransaction', retryable: false },
  INTERNAL: { code: 1, codeName: 'InternalError', retryable: false },
} as const satisfies Record<string, { code: number; codeName: string; retryable: boolean }>;

/** One of the closed set of error codes. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Structured, JSON-serialisable context attached to an error (what was wrong and where). */
export type ErrorDetails = Record<string, unknown>;

/**
 * MongoDB's error labels, which tell a client what to retry: the whole transaction
 * (`TransientTransactionError`) or only its commit (`UnknownTransactionCommitResult`).
 */
export type ErrorLabel = 'TransientTransactionError' | 'UnknownTransactionCommitResult';

/** The wire form of an error, identical on every hop: `{ code, message, retryable, details, errorLabels }`. */
export interface ErrorEnvelope {
  code: ErrorCode;
  message: string;
  retryable: boolean;
  details?: ErrorDetails;
  errorLabels?: ErrorLabel[];
}

/**
 * The project's error. `retryable` defaults to the code's default; `details` carries the
 * structured context (field, namespace, versions) a client may branch on.
 */
export class TesseraError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: ErrorDetails | undefined;
  /** What a client in a transaction retries after this error; empty outside transactions. */
  readonly errorLabels: readonly ErrorLabel[];
  /**
   * The node whose answer carried this error, set by the client that rebuilt it from the
   * envelope; undefined for an error raised in this process, a transport failure included. So a
   * caller tells "the node answered that it failed" (it ran and ended) from "the node could not
   * be reached" (it may still be running), whatever the code: a node relays its peers' errors
   * with their codes, `HOST_UNREACHABLE` included. Not part of the envelope: it names one hop.
   */
  readonly answeredBy: string | undefined;

  /**
   * @param code one of `ERROR_CODES`.
   * @param message a sentence saying what was wrong and where.
   * @param options `details` for structured context; `retryable` to override the code's default.
   * Throws nothing.
   */
  constructor(
    code: ErrorCode,
    message: string,
    options: {
      details?: ErrorDetails;
      retryable?: boolean;
      cause?: unknown;
      answeredBy?: string;
      errorLabels?: readonly ErrorLabel[];
    } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'TesseraError';
    this.code = code;
    this.retryable = options.retryable ?? ERROR_CODES[code].retryable;
    this.details = options.details;
    this.answeredBy = options.answeredBy;
    this.errorLabels = options.errorLabels ?? [];
  }

  /** This error with `label` added (the same error when it has it already). Throws nothing. */
  withLabel(label: ErrorLabel): TesseraError {
    if (this.errorLabels.includes(label)) return this;
    return new TesseraError(this.code, this.message, {
      details: this.details,
      retryable: this.retryable,
      cause: this.cause,
      answeredBy: this.answeredBy,
      errorLabels: [...this.errorLabels, label],
    });
  }

  /** Returns the wire envelope of this error. Throws nothing. */
  toEnvelope(): ErrorEnvelope {
    return {
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(this.details === undefined ? {} : { details: this.details }),
      ...(this.errorLabels.length === 0 ? {} : { errorLabels: [...this.errorLabels] }),
    };
  }

  /**
   * Rebuilds an error from its wire envelope, so that an error raised on one node is the same
   * error on the node that called it; `answeredBy` names the node that answered it. An envelope
   * with an unknown code becomes `INTERNAL`. Throws nothing.
   */
  static fromEnvelope(envelope: ErrorEnvelope, answeredBy?: string): TesseraError {
    const code: ErrorCode = isErrorCode(envelope.code) ? envelope.code : 'INTERNAL';
    return new TesseraError(code, envelope.message, {
      details: envelope.details,
      retryable: envelope.retryable,
      answeredBy,
      ...(envelope.errorLabels === undefined ? {} : { errorLabels: envelope.errorLabels }),
    });
  }
}

/**
 * A duplicate key error's `keyPattern` and `keyValue`, which MongoDB puts at the top of the error
 * (drivers read them there); empty for any other error or one that does not carry them.
 */
export function duplicateKeyFields(envelope: ErrorEnvelope): { keyPattern?: unknown; keyValue?: unknown } {
  if (envelope.code !== 'DUPLICATE_KEY' || envelope.details === undefined) return {};
  const { keyPattern, keyValue } = envelope.details;
  return keyPattern === undefined || keyValue === undefined ? {} : { keyPattern, keyValue };
}

/** True when `value` is one of the closed set of error codes. Throws nothing. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/** True when `value` has the shape of an error envelope (as parsed from JSON). Throws nothing. */
export function isErrorEnvelope(value: unknown): value is ErrorEnvelope {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.code === 'string' && typeof v.message === 'string' && typeof v.retryable === 'boolean';
}

/**
 * The errors after which a client retries a whole transaction (MongoDB's
 * TransientTransactionError): a write conflict, a lock not granted in time, routing that moved
 * under the transaction, a snapshot no longer kept, a participant that lost the transaction or
 * could not be reached before the commit began.
 */
const TRANSIENT_IN_TRANSACTION: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'WRITE_CONFLICT',
  'LOCK_TIMEOUT',
  'STALE_CONFIG',
  'STALE_DB_VERSION',
  'STALE_EPOCH',
  'STALE_CHUNK_HISTORY',
  'SNAPSHOT_TOO_OLD',
  'SNAPSHOT_UNAVAILABLE',
  'NO_SUCH_TRANSACTION',
  'HOST_UNREACHABLE',
  'NETWORK_TIMEOUT',
  'SHUTDOWN_IN_PROGRESS',
  'EXCEEDED_TIME_LIMIT',
  'TEMPORARILY_UNAVAILABLE',
]);

/** `error` as a transaction's statement answers it: labelled `TransientTransactionError` when retrying the transaction may succeed. Throws nothing. */
export function labelInTransaction(error: TesseraError): TesseraError {
  return TRANSIENT_IN_TRANSACTION.has(error.code) ? error.withLabel('TransientTransactionError') : error;
}
