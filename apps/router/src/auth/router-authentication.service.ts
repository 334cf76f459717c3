import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { InternalClients, LOGGER, type Periodic, PrincipalCache, SETTINGS, advertisedUrl, runPeriodically } from '@tessera/platform';
import type { ConfigClient, Principal } from '@tessera/protocol';
import type { RouterSettings } from '../router.settings.js';

/**
 * Who a request is, as the config server says and this router remembers (MongoDB's user cache on
 * mongos, `PrincipalCache`). Every TESSERA_USER_CACHE_INVALIDATION_INTERVAL_SECS the router asks
 * the users' generation, and a moved generation empties the cache.
 */
@Injectable()
export class RouterAuthentication implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly config: ConfigClient;
  private readonly cache: PrincipalCache;
  private loop: Periodic | undefined;

  constructor(
    @Inject(SETTINGS) private readonly settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    clients: InternalClients,
  ) {
    // A refused sign-in is answered after the failures' delay (up to 4 s), and a password waits
    // its turn for a hash: room for both, so that a slowed caller hears 401, not a timeout.
    this.config = clients.config(settings.TESSERA_CONFIG_URL, 10_000);
    const node = settings.TESSERA_NODE_NAME ?? advertisedUrl(settings);
    this.cache = new PrincipalCache((authorization, remoteAddress) =>
      this.config.authenticate({ authorization, ...(remoteAddress === undefined ? {} : { remoteAddress }), node }),
    );
  }

  onApplicationBootstrap(): void {
    if (this.settings.TESSERA_AUTHORIZATION !== 'enabled') return;
    this.loop = runPeriodically(
      async () => this.cache.observeGeneration(await this.config.authGeneration()),
      this.settings.TESSERA_USER_CACHE_INVALIDATION_INTERVAL_SECS * 1_000,
      (error) => this.logger.warn({ err: error }, `cannot read the users' generation: ${(error as Error).message}`),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  /**
   * The principal of a header verified before, without waiting; undefined when it must be signed
   * in (or refused). `connection`: the request's socket (see PrincipalCache).
   */
  cached(authorization: string | string[] | undefined, connection?: object): Principal | undefined {
    return this.cache.cached(authorization, connection);
  }

  /** The principal of a request's `Authorization` header; UNAUTHORIZED without one, AUTHENTICATION_FAILED for a wrong one. */
  principalOf(authorization: string | string[] | undefined, remoteAddress: string): Promise<Principal> {
    return this.cache.principalOf(authorization, remoteAddress);
  }
}
