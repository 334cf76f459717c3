import type { ErrorCode } from '@tessera/core';

/**
 * The HTTP status for each error code: one exhaustive switch, so a new code cannot be
 * forgotten (the compiler refuses a missing case).
 */
export function httpStatusFor(code: ErrorCode): number {
  switch (code) {
    case 'BAD_VALUE':
    case 'FAILED_TO_PARSE':
    case 'INVALID_OPTIONS':
    case 'INVALID_NAMESPACE':
    case 'SHARD_KEY_NOT_FOUND':
    case 'IMMUTABLE_FIELD':
    case 'TYPE_MISMATCH':
    case 'CANNOT_CREATE_INDEX':
    case 'DOLLAR_PREFIXED_FIELD_NAME':
    case 'CLUSTER_TIME_FAILS_RATE_LIMITER':
    case 'PIPELINE_STAGE_SHAPE':
    case 'UNRECOGNIZED_PIPELINE_STAGE':
    case 'STAGE_NOT_LAST':
      return 400;
    case 'UNAUTHORIZED':
    case 'AUTHENTICATION_FAILED':
    case 'TIME_PROOF_MISMATCH':
      return 401;
    case 'FORBIDDEN':
      return 403;
    case 'RATE_LIMITED':
      return 429;
    case 'NAMESPACE_NOT_FOUND':
    case 'CURSOR_NOT_FOUND':
    case 'SHARD_NOT_FOUND':
    case 'NOT_FOUND':
    case 'NO_SUCH_TRANSACTION':
      return 404;
    case 'ILLEGAL_OPERATION':
    case 'NAMESPACE_EXISTS':
    case 'OPERATION_NOT_SUPPORTED_IN_TRANSACTION':
    case 'DUPLICATE_KEY':
    case 'CONFLICTING_OPERATION':
    case 'LOCK_BUSY':
    case 'STALE_CONFIG':
    case 'STALE_DB_VERSION':
    case 'STALE_EPOCH':
    case 'STALE_CHUNK_HISTORY':
    case 'TRANSACTION_TOO_OLD':
    case 'INCOMPLETE_TRANSACTION_HISTORY':
    case 'CHUNK_TOO_BIG':
    case 'SNAPSHOT_TOO_OLD':
    case 'SNAPSHOT_UNAVAILABLE':
    case 'WRITE_CONFLICT':
    case 'LOCK_TIMEOUT':
    case 'PREPARED_TRANSACTION_IN_PROGRESS':
    case 'TRANSACTION_EXCEEDED_LIFETIME_LIMIT':
    case 'WOULD_CHANGE_OWNING_SHARD':
    case 'MERGE_STAGE_NO_MATCHING_DOCUMENT':
      return 409;
    case 'DOCUMENT_TOO_LARGE':
      return 413;
    case 'NOT_LEADER':
    case 'SHUTDOWN_IN_PROGRESS':
    case 'TEMPORARILY_UNAVAILABLE':
      return 503;
    case 'HOST_UNREACHABLE':
      return 502;
    case 'NETWORK_TIMEOUT':
    case 'EXCEEDED_TIME_LIMIT':
    case 'MAX_TIME_MS_EXPIRED':
      return 504;
    case 'INTERNAL':
      return 500;
  }
}
