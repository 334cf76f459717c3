import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import { type Observable, Subject } from 'rxjs';
import { LOGGER, SETTINGS } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';
import { PgListener } from '../events/pg-listener.js';
import { LeaderService } from '../leader/leader.service.js';
import { LeaderPeriodic } from '../leader/leader-periodic.js';
import { AccessStore, type AuditRecord } from './access.store.js';

/** The NOTIFY channel `audit_log`'s insert trigger announces each new entry's seq on. */
const AUDIT_CHANNEL = 'tessera_audit';
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
  private readonly listener: PgListener;
  private queue: Promise<void> = Promise.resolve();
  private delivered = 0;
  private readonly retention: LeaderPeriodic;

  constructor(
    private readonly store: AccessStore,
    private readonly leader: LeaderService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    // Each announcement, and a return after a lost connection, reads the entries past the last delivered.
    const catchUp = () => this.enqueue(() => this.catchUp());
    this.listener = new PgListener(
      settings.TESSERA_DATABASE_URL,
      AUDIT_CHANNEL,
      'tessera-audit',
      { notified: catchUp, reconnected: catchUp },
      logger,
    );
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
    // The starting point first: an entry written before LISTEN begins goes out with the next one.
    this.delivered = await this.store.lastAuditSeq();
    await this.listener.start();
  }

  async onApplicationShutdown(): Promise<void> {
    this.retention.stop();
    await this.listener.stop();
    await this.queue;
    this.live.complete();
  }

  /** Every audit entry written from now on. */
  stream(): Observable<AuditRecord> {
    return this.live.asObservable();
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
