import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { InternalClients, LOGGER } from '@tessera/platform';
import { ShardIdentityService } from '../identity/shard-identity.service.js';

export interface MigrationReport {
  what: string;
  ns: string;
  details: Record<string, unknown>;
}

/**
 * Sends a shard's migration phases, progress and range deletions to the config server's
 * changelog, in the order they happened, without holding up the migration: a report that
 * cannot be delivered is logged and dropped (the shard's own log keeps it).
 */
@Injectable()
export class MigrationReporter {
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly identity: ShardIdentityService,
    private readonly clients: InternalClients,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  report(entry: MigrationReport): void {
    this.queue = this.queue.then(() => this.send(entry));
  }

  /** Resolves when every report made so far has been sent or dropped. */
  flushed(): Promise<void> {
    return this.queue;
  }

  private async send(entry: MigrationReport): Promise<void> {
    try {
      const identity = await this.identity.get();
      if (identity === null) return;
      await this.clients.config(identity.configUrl).reportChangelog({ ...entry, shard: identity.shardName });
    } catch (error) {
      this.logger.warn({ err: error, entry }, `could not report ${entry.what} to the config server: ${(error as Error).message}`);
    }
  }
}
