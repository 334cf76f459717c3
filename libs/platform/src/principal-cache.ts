import { createHash } from 'node:crypto';
import { TesseraError } from '@tessera/core';
import type { AuthenticateResult, Principal } from '@tessera/protocol';

const digestOf = (authorization: string) => createHash('sha256').update(authorization).digest('base64');

/** Verified `Authorization` headers kept at most; past it the oldest is forgotten. */
const MAX_CACHED = 10_000;

/**
 * The callers a node has verified (MongoDB's user cache): a header verified once is answered from
 * memory, by its SHA-256, so a request pays a digest and a lookup, not a sign-in. The cache holds
 * principals of one users' generation; `observeGeneration` with a newer one empties it, so a
 * dropped user or revoked key is refused from then on. Refusals are not kept (the config server
 * slows repeated ones), and concurrent first requests with one header share one sign-in.
 */
export class PrincipalCache {
  private readonly cache = new Map<string, Principal>();
  private readonly pending = new Map<string, Promise<Principal>>();
  /**
   * The last header each connection sent and its principal, at a generation: a keep-alive
   * client sends the same header with every request, which is then compared, not digested. Held
   * as long as the connection is, as its requests hold the header anyway.
   */
  private readonly lastOnConnection = new WeakMap<object, { authorization: string; principal: Principal; generation: number }>();
  private generation = 0;

  /** @param signIn verifies a header from a caller's address (throws AUTHENTICATION_FAILED when it is wrong) */
  constructor(private readonly signIn: (authorization: string, remoteAddress: string | undefined) => Promise<AuthenticateResult>) {}

  /**
   * The principal of a header verified before, without waiting; undefined when it must be signed
   * in (or refused). `connection`: the request's socket, whose last header is remembered.
   */
  cached(authorization: unknown, connection?: object): Principal | undefined {
    if (typeof authorization !== 'string' || authorization === '') return undefined;
    const last = connection === undefined ? undefined : this.lastOnConnection.get(connection);
    if (last !== undefined && last.authorization === authorization && last.generation === this.generation) return last.principal;
    const principal = this.cache.get(digestOf(authorization));
    if (principal !== undefined && connection !== undefined) {
      this.lastOnConnection.set(connection, { authorization, principal, generation: this.generation });
    }
    return principal;
  }

  /** The principal of an `Authorization` header; UNAUTHORIZED without one, AUTHENTICATION_FAILED for a wrong one. */
  async principalOf(authorization: unknown, remoteAddress?: string): Promise<Principal> {
    if (authorization === undefined || authorization === null || authorization === '') {
      throw new TesseraError('UNAUTHORIZED', 'this command requires authentication');
    }
    if (typeof authorization !== 'string') throw new TesseraError('AUTHENTICATION_FAILED', 'Authentication failed.');
    const digest = digestOf(authorization);
    const cached = this.cache.get(digest);
    if (cached !== undefined) return cached;
    let signIn = this.pending.get(digest);
    if (signIn === undefined) {
      signIn = this.verify(digest, authorization, remoteAddress).finally(() => this.pending.delete(digest));
      this.pending.set(digest, signIn);
    }
    return signIn;
  }

  /** The users' generation as last read; a different one empties the cache. */
  observeGeneration(generation: number): void {
    if (generation === this.generation) return;
    this.cache.clear();
    this.generation = generation;
  }

  private async verify(digest: string, authorization: string, remoteAddress: string | undefined): Promise<Principal> {
    const answer = await this.signIn(authorization, remoteAddress);
    // Verified at a generation the cache is not at (now): not kept; the next request verifies again.
    if (answer.generation === this.generation) {
      if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(digest, answer.principal);
    } else if (answer.generation > this.generation) {
      this.observeGeneration(answer.generation);
    }
    return answer.principal;
  }
}
