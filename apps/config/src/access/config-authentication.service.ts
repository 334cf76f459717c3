import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER, type Periodic, PrincipalCache, runPeriodically } from '@tessera/platform';
import type { Principal } from '@tessera/protocol';
import { AccessControlService } from './access-control.service.js';

/** How often a config process reads the users' generation: it shares their database, so a read is cheap. */
const GENERATION_POLL_MS = 1_000;

/**
 * Who a control-plane caller (GraphQL, socket.io) is: verified by this process's own
 * AccessControlService and kept in a `PrincipalCache`, which empties when the users' generation
 * moves (read every second).
 */
@Injectable()
export class ConfigAuthentication implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly cache: PrincipalCache;
  private loop: Periodic | undefined;

  constructor(
    private readonly access: AccessControlService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.cache = new PrincipalCache((authorization, remoteAddress) => access.authenticate(authorization, remoteAddress, access.node));
  }

  onApplicationBootstrap(): void {
    this.loop = runPeriodically(
      async () => this.cache.observeGeneration(await this.access.generation()),
      GENERATION_POLL_MS,
      (error) => this.logger.warn({ err: error }, `cannot read the users' generation: ${(error as Error).message}`),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  /**
   * The principal of an `Authorization` header, or of a bare key (as socket.io's `auth.token` and
   * graphql-ws's `token` carry it); UNAUTHORIZED without one, AUTHENTICATION_FAILED for a wrong one.
   */
  principalOf(authorization: unknown, remoteAddress: string | undefined): Promise<Principal> {
    const header =
      typeof authorization === 'string' && authorization !== '' && !authorization.includes(' ') ? `Bearer ${authorization}` : authorization;
    return this.cache.principalOf(header, remoteAddress);
  }
}
