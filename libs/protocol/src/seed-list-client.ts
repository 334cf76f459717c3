import { TesseraError } from '@tessera/core';
import { type InternalClientOptions, InternalHttpClient } from './internal-http-client.js';

/**
 * Causes of a transport failure that prove the request never reached the node: the connection
 * was refused or never made. Only then is it sent to the next node; a request that may have
 * arrived (a reset, a timeout after sending) fails as it did, for its caller to retry or not.
 */
const NOT_DELIVERED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * The node of each seed list that answered last, process-wide: clients are made per use, and a
 * new one should not first try a node the process already found dead.
 */
const lastAnswered = new Map<string, number>();

/** The URLs of a seed list: `http://a:7080,http://b:7080` (as a connection string names a replica set's hosts). */
export function seedUrls(seedList: string): string[] {
  return seedList
    .split(',')
    .map((url) => url.trim())
    .filter((url) => url !== '');
}

/**
 * A client of any node of a seed list, all serving the same API (the config processes: every
 * one answers every request, forwarding what only the leader may do). Each request goes to the
 * node that answered last; when that one cannot be reached, to the next, once around the list.
 */
export class SeedListClient {
  private readonly nodes: InternalHttpClient[];

  constructor(
    readonly seedList: string,
    options: InternalClientOptions,
  ) {
    const urls = seedUrls(seedList);
    if (urls.length === 0) throw new TesseraError('BAD_VALUE', `no URL in the seed list "${seedList}"`);
    this.nodes = urls.map((url) => new InternalHttpClient(url, options));
  }

  /** The node requests go to first now. */
  get baseUrl(): string {
    return this.nodes[this.preferred()]!.baseUrl;
  }

  call<T>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<T> {
    return this.onSomeNode((node) => node.call<T>(method, path, body));
  }

  callText(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<string> {
    return this.onSomeNode((node) => node.callText(method, path, body));
  }

  private async onSomeNode<T>(send: (node: InternalHttpClient) => Promise<T>): Promise<T> {
    const first = this.preferred();
    for (let n = 0; ; n++) {
      const at = (first + n) % this.nodes.length;
      try {
        const answer = await send(this.nodes[at]!);
        if (at !== first) lastAnswered.set(this.seedList, at);
        return answer;
      } catch (error) {
        if (n + 1 >= this.nodes.length || !notDelivered(error)) throw error;
      }
    }
  }

  private preferred(): number {
    return (lastAnswered.get(this.seedList) ?? 0) % this.nodes.length;
  }
}

/** Whether a request failed in a way that proves it never reached the node (refused, never connected). */
export function notDelivered(error: unknown): boolean {
  if (!(error instanceof TesseraError) || (error.code !== 'HOST_UNREACHABLE' && error.code !== 'NETWORK_TIMEOUT')) return false;
  const cause = error.cause as { code?: string } | undefined;
  return NOT_DELIVERED.has(cause?.code ?? '');
}
