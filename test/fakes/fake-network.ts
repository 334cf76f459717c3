/**
 * An in-memory network for internal RPC, shared by unit tests (Vitess's memorytopo idea): the
 * real typed clients (`ConfigClient`, `ShardClient`, `MigrationClient`, or `InternalClients`)
 * send their requests through a fake undici `Dispatcher` to route handlers that nodes register
 * by URL. Only the network is fake: signing, the error envelope and the mapping of transport
 * failures are the clients' own.
 *
 *     const network = new FakeNetwork();
 *     network.node('http://recipient').on('POST', '/internal/migration/recvChunkStart', (req) => status);
 *     network.node('http://shard0').on('DELETE', '/internal/collections/:uuid', (req) => drop(req.params.uuid));
 *     network.failNth({ path: '/internal/migration/recvChunkStatus', nth: 2, fault: 'unreachable' });
 *     const recipient = new MigrationClient('http://recipient', network.clientOptions());
 *
 * A handler's `TesseraError` becomes the error envelope with the code's HTTP status, so the
 * client rebuilds it marked `answeredBy` the node; any other thrown error answers `INTERNAL`.
 * Faults: a node made unreachable refuses every request (`HOST_UNREACHABLE` at the client); the
 * Nth call matching a route can be refused, time out (`NETWORK_TIMEOUT`), answer a given
 * error, or be delayed.
 */
import type { Dispatcher } from 'undici';
import pino from 'pino';
import { TesseraError } from '@tessera/core';
import { type InternalClientOptions, httpStatusFor } from '@tessera/protocol';
import { InternalClients, VectorClockService } from '@tessera/platform';

/** The shared secret the fake network's clients sign with (nothing verifies it). */
export const FAKE_CLUSTER_KEY = 'fake-network-cluster-key';

/** One request as a handler sees it. */
export interface FakeRequest {
  origin: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  /** The parsed JSON body; undefined without one. */
  body: unknown;
  /** The values of the route's `:name` segments, decoded; empty for a route without any. */
  params: Record<string, string>;
}

/** Answers a request: a string goes out as text, anything else as JSON. Throw to answer an error. */
export type FakeHandler = (request: FakeRequest) => unknown;

/** What a matching call suffers: refused, timed out, answered with an error by the node. */
export type FakeFault = 'unreachable' | 'timeout' | TesseraError;

/** Which calls a fault or delay applies to. */
export interface CallMatcher {
  /** The node's URL; any node when omitted. */
  node?: string;
  /** Any method when omitted. */
  method?: string;
  /** The exact path, or a pattern it must match. */
  path: string | RegExp;
  /** The first matching call affected, 1-based. Default 1. */
  nth?: number;
  /** How many matching calls from the nth on are affected. Default 1; Infinity for all. */
  times?: number;
}

interface Rule extends Required<Omit<CallMatcher, 'node' | 'method'>> {
  node: string | undefined;
  method: string | undefined;
  seen: number;
  fault: FakeFault | undefined;
  delayMs: number;
}

/** The routes of one node. */
export class FakeNode {
  private readonly routes: Array<{ method: string; segments: string[]; handler: FakeHandler }> = [];

  constructor(readonly url: string) {}

  /**
   * Registers the handler of `method path` (a later one for the same route replaces it). A
   * segment `:name` matches any one segment, handed to the handler decoded as `params.name`.
   */
  on(method: string, path: string, handler: FakeHandler): this {
    const route = { method: method.toUpperCase(), segments: path.split('/'), handler };
    const same = this.routes.findIndex((r) => r.method === route.method && r.segments.join('/') === path);
    if (same === -1) this.routes.push(route);
    else this.routes[same] = route;
    return this;
  }

  /** The handler of a request and the values of its route's parameters; a route without parameters wins. */
  route(method: string, path: string): { handler: FakeHandler; params: Record<string, string> } | undefined {
    const segments = (path.split('?')[0] ?? path).split('/');
    let found: { handler: FakeHandler; params: Record<string, string> } | undefined;
    for (const route of this.routes) {
      if (route.method !== method.toUpperCase() || route.segments.length !== segments.length) continue;
      const params: Record<string, string> = {};
      const matched = route.segments.every((segment, i) => {
        if (segment.startsWith(':')) params[segment.slice(1)] = decodeURIComponent(segments[i]!);
        return segment.startsWith(':') || segment === segments[i];
      });
      if (!matched) continue;
      if (Object.keys(params).length === 0) return { handler: route.handler, params };
      found ??= { handler: route.handler, params };
    }
    return found;
  }
}

/** The fake network: nodes by URL, fault rules, and a record of every call. */
export class FakeNetwork {
  /** Every request sent, in order, faulted ones included. */
  readonly calls: FakeRequest[] = [];
  private readonly nodes = new Map<string, FakeNode>();
  private readonly down = new Set<string>();
  private readonly rules: Rule[] = [];

  /** The dispatcher to give the clients (only `request` is implemented). */
  readonly dispatcher: Dispatcher = { request: (options: Dispatcher.RequestOptions) => this.request(options) } as unknown as Dispatcher;

  /** The node at `url`, registered on first use. */
  node(url: string): FakeNode {
    const key = originOf(url);
    let node = this.nodes.get(key);
    if (node === undefined) {
      node = new FakeNode(key);
      this.nodes.set(key, node);
    }
    return node;
  }

  /** Makes the node refuse every connection (`ECONNREFUSED`) until `reachable` is called. */
  unreachable(url: string): void {
    this.down.add(originOf(url));
  }

  reachable(url: string): void {
    this.down.delete(originOf(url));
  }

  /** Fails the nth (and the next `times - 1`) call matching `matcher` with `fault`. */
  failNth(matcher: CallMatcher & { fault: FakeFault }): void {
    this.rules.push(ruleOf(matcher, matcher.fault, 0));
  }

  /** Holds the nth (and the next `times - 1`) call matching `matcher` for `ms` before it goes through. */
  delayNth(matcher: CallMatcher & { ms: number }): void {
    this.rules.push(ruleOf(matcher, undefined, matcher.ms));
  }

  /** The calls sent to `path` (of any node unless `node` is given). */
  callsTo(path: string | RegExp, node?: string): FakeRequest[] {
    return this.calls.filter((c) => matches(path, c.path) && (node === undefined || c.origin === originOf(node)));
  }

  /** Options for a typed client (`new MigrationClient(url, network.clientOptions())`). */
  clientOptions(timeoutMs?: number): InternalClientOptions {
    return { clusterKey: FAKE_CLUSTER_KEY, dispatcher: this.dispatcher, ...(timeoutMs === undefined ? {} : { timeoutMs }) };
  }

  /** The platform's `InternalClients` over this network, with shard clients on HTTP. */
  internalClients(): InternalClients {
    const settings = {
      TESSERA_CLUSTER_KEY: FAKE_CLUSTER_KEY,
      TESSERA_SHARD_TRANSPORT: 'http' as const,
      TESSERA_SHUTDOWN_TIMEOUT_MS: 1_000,
    };
    return new InternalClients(settings, this.dispatcher, new VectorClockService(), pino({ level: 'silent' }));
  }

  private async request(
    options: Dispatcher.RequestOptions,
  ): Promise<Pick<Dispatcher.ResponseData, 'statusCode' | 'headers'> & { body: { text(): Promise<string> } }> {
    const origin = originOf(String(options.origin));
    const method = String(options.method).toUpperCase();
    const text = typeof options.body === 'string' ? options.body : '';
    const request: FakeRequest = {
      origin,
      method,
      path: options.path,
      headers: (options.headers ?? {}) as Record<string, string>,
      body: text === '' ? undefined : (JSON.parse(text) as unknown),
      params: this.nodes.get(origin)?.route(method, options.path)?.params ?? {},
    };
    this.calls.push(request);
    for (const rule of this.rules) {
      if (!this.applies(rule, request)) continue;
      if (rule.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, rule.delayMs));
      if (rule.fault !== undefined) return this.fail(rule.fault);
    }
    if (this.down.has(origin)) throw transportError('ECONNREFUSED', `connect ECONNREFUSED ${origin}`);
    return this.answer(request);
  }

  /** Counts the call against the rule; true when it is one the rule affects. */
  private applies(rule: Rule, request: FakeRequest): boolean {
    if (rule.node !== undefined && rule.node !== request.origin) return false;
    if (rule.method !== undefined && rule.method !== request.method) return false;
    if (!matches(rule.path, request.path)) return false;
    rule.seen += 1;
    return rule.seen >= rule.nth && rule.seen < rule.nth + rule.times;
  }

  private fail(fault: FakeFault) {
    if (fault === 'unreachable') throw transportError('ECONNREFUSED', 'connect ECONNREFUSED (injected)');
    if (fault === 'timeout') throw transportError('UND_ERR_HEADERS_TIMEOUT', 'Headers Timeout Error (injected)');
    return errorResponse(fault);
  }

  private async answer(request: FakeRequest) {
    const handler = this.nodes.get(request.origin)?.route(request.method, request.path)?.handler;
    if (handler === undefined) {
      return errorResponse(new TesseraError('NOT_FOUND', `no route ${request.method} ${request.path} on ${request.origin}`));
    }
    try {
      const result = await handler(request);
      if (typeof result === 'string') return response(200, 'text/plain; charset=utf-8', result);
      return response(200, 'application/json', result === undefined ? '' : JSON.stringify(result));
    } catch (error) {
      return errorResponse(error instanceof TesseraError ? error : new TesseraError('INTERNAL', (error as Error).message));
    }
  }
}

function ruleOf(matcher: CallMatcher, fault: FakeFault | undefined, delayMs: number): Rule {
  return {
    node: matcher.node === undefined ? undefined : originOf(matcher.node),
    method: matcher.method?.toUpperCase(),
    path: matcher.path,
    nth: matcher.nth ?? 1,
    times: matcher.times ?? 1,
    seen: 0,
    fault,
    delayMs,
  };
}

function matches(pattern: string | RegExp, path: string): boolean {
  const bare = path.split('?')[0] ?? path;
  return typeof pattern === 'string' ? pattern === bare : pattern.test(bare);
}

function originOf(url: string): string {
  return new URL(url).origin;
}

function transportError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

function response(statusCode: number, contentType: string, text: string) {
  return { statusCode, headers: { 'content-type': contentType }, body: { text: async () => text } };
}

function errorResponse(error: TesseraError) {
  return response(httpStatusFor(error.code), 'application/json', JSON.stringify({ error: error.toEnvelope() }));
}
