import { Agent, type Dispatcher, errors as undiciErrors } from 'undici';
import { TesseraError } from '@tessera/core';
import { SIGNATURE_HEADER, SIGNED_HEADERS, signRequest, verifyResponse } from './cluster-auth.js';
import { type ClockGossip, vectorTimeFromHeaders, vectorTimeHeaders } from './clock-gossip.js';
import { errorOfAnswer, hostUnreachable, networkTimeout } from './transport-errors.js';
import type { WireAgent } from './wire-client.js';

export interface InternalClientOptions {
  /** The shared cluster secret that signs every request. */
  clusterKey: string;
  /** The connection pool, shared by every client of one process. */
  dispatcher: Dispatcher;
  /** Per-request deadline, headers and body each. Default 10 s. */
  timeoutMs?: number;
  /** Request id forwarded in `x-request-id`, so one operation can be followed across nodes. */
  requestId?: () => string | undefined;
  now?: () => number;
  /** The node's vector clock: sent on every request, advanced from every response. */
  gossip?: ClockGossip;
  /** When given, requests to an `http:` node travel as frames over its wire connection (see wire-client.ts). */
  wire?: WireAgent;
}

/**
 * A keep-alive connection pool for internal traffic; close it at shutdown. `ca`: the
 * certificate authorities trusted for `https:` nodes, beside none (the system's when unset).
 */
export function createInternalAgent(options: { connectionsPerOrigin?: number; ca?: Buffer | undefined } = {}): Agent {
  return new Agent({
    connections: options.connectionsPerOrigin ?? 32,
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 600_000,
    connect: { timeout: 5_000, ...(options.ca === undefined ? {} : { ca: options.ca }) },
  });
}

/** A node's whole answer to one request. */
interface Exchange {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/**
 * Signed JSON over HTTP to one node, or over its wire connection when given a `WireAgent` (the
 * same messages, framed). Errors come back as the node raised them: a
 * `TesseraError` rebuilt from the envelope, so codes, retryability and details survive hops.
 * Transport failures become `HOST_UNREACHABLE` or `NETWORK_TIMEOUT` naming the node.
 */
export class InternalHttpClient {
  private readonly timeoutMs: number;
  private readonly now: () => number;

  constructor(
    readonly baseUrl: string,
    private readonly options: InternalClientOptions,
  ) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** Sends one request; resolves with the parsed JSON body, rejects with a `TesseraError`. */
  async call<T>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<T> {
    const text = await this.callText(method, path, body);
    return (text === '' ? undefined : safeJsonParse(text)) as T;
  }

  /**
   * `call` for a route that answers plain text (bulk transfers a node streams out as lines,
   * cheaper to build and read than JSON): resolves with the body as it came.
   */
  async callText(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<string> {
    const payload = body === undefined ? '' : JSON.stringify(body);
    const gossip = this.options.gossip === undefined ? {} : vectorTimeHeaders(this.options.gossip.now());
    const headers: Record<string, string> = {
      ...gossip,
      ...signRequest(this.options.clusterKey, method, path, payload, this.now(), gossip),
      accept: 'application/json, text/plain',
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const requestId = this.options.requestId?.();
    if (requestId !== undefined) headers['x-request-id'] = requestId;

    const response = await this.exchange(method, path, headers, body === undefined ? undefined : payload);
    this.advanceClock(headers[SIGNATURE_HEADER]!, response.text, response.headers);
    if (response.status >= 200 && response.status < 300) return response.text;
    const error = errorOfAnswer(response.text, this.baseUrl);
    if (error !== undefined) throw error;
    throw new TesseraError('INTERNAL', `${method} ${this.baseUrl}${path} answered HTTP ${response.status} without an error envelope`, {
      details: { status: response.status, body: response.text.slice(0, 500) },
    });
  }

  /** One request and its whole answer, over the node's wire connection or else HTTP. */
  private async exchange(method: string, path: string, headers: Record<string, string>, payload: string | undefined): Promise<Exchange> {
    const answered = await this.options.wire?.connectionTo(this.baseUrl)?.request(method, path, headers, payload ?? '', this.timeoutMs);
    if (answered !== undefined) return answered;
    try {
      const response = await this.options.dispatcher.request({
        origin: this.baseUrl,
        path,
        method: method as Dispatcher.HttpMethod,
        headers,
        body: payload,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
    } catch (error) {
      throw this.transportError(method, path, error);
    }
  }

  /** Advances the vector clock from a response, only when the node signed it with the cluster key. */
  private advanceClock(requestSignature: string, body: string, headers: Record<string, string | string[] | undefined>): void {
    if (this.options.gossip === undefined) return;
    const one = (name: string) => {
      const value = headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const signed = Object.fromEntries(SIGNED_HEADERS.map((name) => [name, one(name)]));
    if (verifyResponse(this.options.clusterKey, requestSignature, body, signed, one(SIGNATURE_HEADER))) {
      this.options.gossip.advance(vectorTimeFromHeaders(headers));
    }
  }

  private transportError(method: string, path: string, error: unknown): TesseraError {
    const code = (error as { code?: string }).code ?? '';
    const where = `${method} ${this.baseUrl}${path}`;
    if (TIMEOUT_CODES.has(code) || error instanceof undiciErrors.HeadersTimeoutError) {
      return networkTimeout(where, this.baseUrl, this.timeoutMs, error);
    }
    return hostUnreachable(where, this.baseUrl, UNREACHABLE_CODES.has(code) ? code : (error as Error).message, error);
  }
}

function safeJsonParse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
