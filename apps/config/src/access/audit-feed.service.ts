import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import pg from 'pg';
import type { Logger } from 'pino';
import { type Observable, Subject } from 'rxjs';
import { LOGGER, SETTINGS } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';
import { LeaderService } from '../leader/leader.service.js';
import { LeaderPeriodic } from '../leader/leader-periodic.js';
import { AccessStore, type AuditRecord } from './access.store.js';

/** The NOTIFY channel `audit_log`'s insert trigger announces each new entry's seq on. */
const AUDIT_CHANNEL = 'tessera_audit';
const RECONNECT_DELAY_MS = 1_000;
/** Entries read per query when catching up after a reconnect. */
const CATCH_UP_PAGE = 500;
/** How often the leader deletes the entries older than TESSERA_AUDIT_RETENTION_DAYS. */
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

/**
 * The audit log as it is written, on every config server whoever wrote it: a dedicated Postgres
 * connection LISTENs on `tessera_audit` and reads each announced entry, in the order announced.
 * After a lost connection, the entries past the last one delivered are read from the table.
 * Entries are delivered once each, by increasing seq; one whose transaction committed after a
 * later seq's was delivered is read by `auditLog`, not streamed. socket.io's `topic:audit` room
 * is fed from here.
 *
 * Also the log's retention: the leader deletes entries older than TESSERA_AUDIT_RETENTION_DAYS,
 * hourly (0 keeps them all).
 */
@Injectable()
export class AuditFeed implements OnModuleInit, OnApplicationShutdown {
  private readonly live = new Subject<AuditRecord>();
  private client: pg.Client | undefined;
  private queue: Promise<void> = Promise.resolve();
  private delivered = 0;
  private closed = false;
  private reconnect: NodeJS.Timeout | undefined;
  private readonly retention: LeaderPeriodic;

  constructor(
    private readonly store: AccessStore,
    private readonly leader: LeaderService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.retention = new LeaderPeriodic(
      'audit retention',
      async () => {
        const days = this.settings.TESSERA_AUDIT_RETENTION_DAYS;
        if (days === 0) return;
        const deleted = await this.store.pruneAudit(new Date(Date.now() - days * 86_400_000));
        if (deleted > 0) this.logger.info({ deleted }, `audit log: ${deleted} entries older than ${days} days deleted`);
      },
      PRUNE_INTERVAL_MS,
      (error) => this.logger.warn({ err: error }, `audit log pruning failed: ${(error as Error).message}`),
    );
  }

  async onModuleInit(): Promise<void> {
    this.leader.register(this.retention);
    await this.connect();
    this.delivered = await this.store.lastAuditSeq();
  }

  async onApplicationShutdown(): Promise<void> {
    this.closed = true;
    this.retention.stop();
    clearTimeout(this.reconnect);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
    await this.queue;
    this.live.complete();
  }

  /** Every audit entry written from now on. */
  stream(): Observable<AuditRecord> {
    return this.live.asObservable();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.settings.TESSERA_DATABASE_URL, application_name: 'tessera-audit' });
    client.on('notification', (message) => {
      if (message.channel === AUDIT_CHANNEL) this.enqueue(() => this.catchUp());
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    await client.connect();
    await client.query(`LISTEN ${AUDIT_CHANNEL}`);
    this.client = client;
  }

  private lost(client: pg.Client, error: Error): void {
    if (this.closed || this.client !== client) return;
    this.client = undefined;
    this.logger.warn({ err: error }, `audit listener connection lost (${error.message}); reconnecting`);
    client.end().catch(() => undefined);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    this.reconnect = setTimeout(() => {
      this.connect().then(
        // Whatever was written while the connection was down is read from the table.
        () => this.enqueue(() => this.catchUp()),
        (error: unknown) => {
          this.logger.warn({ err: error }, 'audit listener could not reconnect; retrying');
          this.scheduleReconnect();
        },
      );
    }, RECONNECT_DELAY_MS);
    this.reconnect.unref();
  }

  private enqueue(work: () => Promise<void>): void {
    this.queue = this.queue.then(work).catch((error: unknown) => this.logger.error({ err: error }, 'audit delivery failed'));
  }

  /** Delivers the entries past the last delivered; a notification's entry is among them. */
  private async catchUp(): Promise<void> {
    for (;;) {
      const records = await this.store.auditAfter(this.delivered, CATCH_UP_PAGE);
      for (const record of records) {
        this.delivered = record.seq;
        this.live.next(record);
      }
      if (records.length < CATCH_UP_PAGE) return;
    }
  }
}
