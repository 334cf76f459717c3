import { TesseraError, isErrorEnvelope } from '@tessera/core';

/** A node could not be reached or dropped the connection: `where` is the request, `url` the node. */
export function hostUnreachable(where: string, url: string, reason: string, cause?: unknown): TesseraError {
  return new TesseraError('HOST_UNREACHABLE', `${where} failed: ${reason}`, { details: { url, reason }, cause });
}

/** A node did not answer `where` within `timeoutMs`. */
export function networkTimeout(where: string, url: string, timeoutMs: number, cause?: unknown): TesseraError {
  return new TesseraError('NETWORK_TIMEOUT', `${where} timed out after ${timeoutMs} ms`, { details: { url }, cause });
}

/**
 * The error a node's answer carries as `{ error: envelope }`, rebuilt and marked as answered by
 * `node` (its URL); undefined when the text is no such envelope.
 */
export function errorOfAnswer(text: string, node: string): TesseraError | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const envelope = (parsed as { error?: unknown } | null)?.error;
  return isErrorEnvelope(envelope) ? TesseraError.fromEnvelope(envelope, node) : undefined;
}
