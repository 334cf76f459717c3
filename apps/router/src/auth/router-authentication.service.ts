import { createHash } from 'node:crypto';
import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';
import { InternalClients, LOGGER, type Periodic, SETTINGS, runPeriodically } from '@tessera/platform';
import type { ConfigClient, Principal } from '@tessera/protocol';
import type { RouterSettings } from '../router.settings.js';

/** Verified `Authorization` headers kept at most; past it the oldest is forgotten. */
const MAX_CACHED = 10_000;

/**
 * Who a request is, as the config server says and this router remembers (MongoDB's user cache on
 * mongos). A header verified once is answered from memory, by its SHA-256, so a request pays a
 * digest and a lookup, not a sign-in. Every TESSERA_USER_CACHE_INVALIDATION_INTERVAL_SECS the
 * router asks the users' generation, and a moved generation empties the cache: a dropped user or
 * revoked key is refused from then on. Refusals are not cached; the config server slows repeated
 * ones. Concurrent first requests with one header share one sign-in.
 */
@Injectable()
export class RouterAuthentication implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly config: ConfigClient;
  private readonly cache = new Map<string, Principal>();
  private readonly pending = new Map<string, Promise<Principal>>();
  private generation = 0;
  private loop: Periodic | undefined;

  constructor(
    @Inject(SETTINGS) private readonly settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    clients: InternalClients,
  ) {
    this.config = clients.config(settings.TESSERA_CONFIG_URL, 5_000);
  }

  onApplicationBootstrap(): void {
    if (this.settings.TESSERA_AUTHORIZATION !== 'enabled') return;
    this.loop = runPeriodically(
      () => this.checkGeneration(),
      this.settings.TESSERA_USER_CACHE_INVALIDATION_INTERVAL_SECS * 1_000,
      (error) => this.logger.warn({ err: error }, `cannot read the users' generation: ${(error as Error).message}`),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  /** The principal of a request's `Authorization` header; UNAUTHORIZED without one, AUTHENTICATION_FAILED for a wrong one. */
  async principalOf(authorization: string | string[] | undefined, remoteAddress: string): Promise<Principal> {
    if (authorization === undefined) throw new TesseraError('UNAUTHORIZED', 'this command requires authentication');
    if (Array.isArray(authorization)) throw new TesseraError('AUTHENTICATION_FAILED', 'Authentication failed.');
    const digest = createHash('sha256').update(authorization).digest('base64');
    const cached = this.cache.get(digest);
    if (cached !== undefined) return cached;
    let signIn = this.pending.get(digest);
    if (signIn === undefined) {
      signIn = this.signIn(digest, authorization, remoteAddress).finally(() => this.pending.delete(digest));
      this.pending.set(digest, signIn);
    }
    return signIn;
  }

  private async signIn(digest: string, authorization: string, remoteAddress: string): Promise<Principal> {
    const generation = this.generation;
    const answer = await this.config.authenticate({ authorization, remoteAddress, node: this.settings.TESSERA_NODE_NAME ?? 'router' });
    // Verified at a generation the cache has not caught up with, or one it has passed: not kept.
    if (answer.generation === generation) {
      if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(digest, answer.principal);
    } else if (answer.generation > generation) {
      this.moveTo(answer.generation);
    }
    return answer.principal;
  }

  private async checkGeneration(): Promise<void> {
    const generation = await this.config.authGeneration();
    if (generation !== this.generation) this.moveTo(generation);
  }

  private moveTo(generation: number): void {
    this.cache.clear();
    this.generation = generation;
  }
}
