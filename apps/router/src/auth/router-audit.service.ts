import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';
import { InternalClients, LOGGER, type Periodic, SETTINGS, advertisedUrl, runPeriodically } from '@tessera/platform';
import type { AuditEntry, ConfigClient } from '@tessera/protocol';
import type { RouterSettings } from '../router.settings.js';

/** Entries sent to the config server per request (its limit). */
const BATCH = 1_000;
/** Entries a router holds while the config server cannot take them; past it, counted, not kept. */
const MAX_HELD = 10_000;
const FLUSH_INTERVAL_MS = 1_000;
/** The longest target the audit message takes. */
const MAX_TARGET = 1_024;

/**
 * What a router audits: the calls it refused (MongoDB's authCheck) and the admin commands of the
 * public API, sent to the config server's audit log every second. A flood past MAX_HELD entries
 * (a caller hammering a refused door, the config server away) is not kept entry by entry: the
 * next flush writes how many were left out, so the log shows the gap.
 */
@Injectable()
export class RouterAudit implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly config: ConfigClient;
  private readonly node: string;
  private held: AuditEntry[] = [];
  private leftOut = 0;
  private loop: Periodic | undefined;
  /** The flush under way: flushes run one after the other, so no entry is sent twice. */
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    @Inject(SETTINGS) private readonly settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    clients: InternalClients,
  ) {
    this.config = clients.config(settings.TESSERA_CONFIG_URL, 10_000);
    this.node = settings.TESSERA_NODE_NAME ?? advertisedUrl(settings);
  }

  onApplicationBootstrap(): void {
    if (this.settings.TESSERA_AUTHORIZATION !== 'enabled') return;
    this.loop = runPeriodically(
      () => this.flush(),
      FLUSH_INTERVAL_MS,
      (error) => this.logger.warn({ err: error }, `cannot send audit entries to the config server: ${(error as Error).message}; kept`),
    );
  }

  async onApplicationShutdown(): Promise<void> {
    this.loop?.stop();
    await this.flush().catch((error: unknown) => this.logger.warn({ err: error }, 'audit entries lost at shutdown'));
  }

  record(entry: Omit<AuditEntry, 'node'>): void {
    if (this.held.length >= MAX_HELD) this.leftOut++;
    // Within the message's bounds, so that no entry can make its batch refused.
    else this.held.push({ ...entry, target: entry.target?.slice(0, MAX_TARGET) ?? null, node: this.node });
  }

  /** Sends what is held, in batches; what the config server did not take stays for the next flush. */
  flush(): Promise<void> {
    const run = this.flushing.then(() => this.send());
    this.flushing = run.catch(() => undefined);
    return run;
  }

  private async send(): Promise<void> {
    if (this.leftOut > 0 && this.held.length < MAX_HELD) {
      const count = this.leftOut;
      this.leftOut = 0;
      this.held.push({
        user: null,
        remoteAddress: null,
        node: this.node,
        action: 'auditOverflow',
        target: null,
        outcome: 'failed',
        details: { count },
      });
    }
    while (this.held.length > 0) {
      const batch = this.held.slice(0, BATCH);
      try {
        await this.config.recordAudit(batch);
      } catch (error) {
        // Refused as malformed, the batch would be refused at every flush and hold back the rest.
        if (!(error instanceof TesseraError) || error.code !== 'BAD_VALUE') throw error;
        this.logger.error({ err: error }, `${batch.length} audit entries refused by the config server: ${error.message}`);
      }
      this.held = this.held.slice(batch.length);
    }
  }
}
