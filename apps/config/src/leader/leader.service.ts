import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { LOGGER, type Periodic, SETTINGS, advertisedUrl, runPeriodically } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';

const SHUTTING_DOWN = 'shutting down';

/** A service that runs only on the leader (MongoDB's primary-only services). */
export interface LeaderOnlyService {
  readonly name: string;
  /** Called when this process becomes leader, with the lease's term (higher on every change of leader). */
  startAsLeader(term: number): Promise<void>;
  /** Called when this process loses or gives up the lease. */
  stopAsLeader(): Promise<void>;
}

export interface LeaderInfo {
  holder: string;
  url: string;
  term: number;
  expiresAt: string;
}

/**
 * Leader election among config processes sharing one database: a single lease row that the
 * holder renews every `TESSERA_LEADER_RENEW_INTERVAL_MS`; anyone may take it once it has not
 * been renewed for `TESSERA_LEADER_LEASE_MS`, which increments the term. Lease times are the
 * database's clock, so the processes' clocks do not matter. When the leader dies, another
 * process leads within lease + renew interval (11 s with the defaults). A leader that cannot
 * renew steps down when its lease would have expired, before anyone else can take it over; a
 * lease taken again after it expired, even by the same process, is a new term, so work fenced by
 * the old term cannot resume by accident.
 */
@Injectable()
export class LeaderService implements OnApplicationBootstrap, OnApplicationShutdown {
  readonly id = `${process.pid}-${randomUUID().slice(0, 8)}`;
  private readonly url: string;
  private readonly services: LeaderOnlyService[] = [];
  private currentTerm: number | undefined;
  /** The term whose leader-only services have all started. */
  private startedTerm: number | undefined;
  private leaseValidUntil = 0;
  private expiry: NodeJS.Timeout | undefined;
  private loop: Periodic | undefined;
  private transition: Promise<void> = Promise.resolve();

  constructor(
    private readonly dataSource: DataSource,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.url = advertisedUrl(settings);
  }

  /** Adds a service to start on election and stop on step-down. */
  register(service: LeaderOnlyService): void {
    this.services.push(service);
  }

  /** True once this process holds a live lease and its leader-only services have started for that term. */
  get isLeader(): boolean {
    return this.currentTerm !== undefined && this.startedTerm === this.currentTerm && Date.now() < this.leaseValidUntil;
  }

  /**
   * The term of this process's lease; throws `NOT_LEADER` naming the leader when it holds none.
   * Just elected, it waits for its leader-only services to start rather than name itself: a
   * caller told that the leader is the process it asked would ask it again, without end.
   */
  async assertLeader(): Promise<number> {
    if (this.isLeader) return this.currentTerm!;
    if (this.currentTerm !== undefined) {
      await this.transition;
      if (this.isLeader) return this.currentTerm;
    }
    const leader = await this.leader();
    if (leader === undefined || leader.holder === this.id) {
      throw new TesseraError('NOT_LEADER', 'this config server is not the leader and no leader is elected yet; retry shortly', {
        details: { leader: null },
      });
    }
    throw new TesseraError('NOT_LEADER', `this config server is not the leader; the leader is ${leader.url}`, {
      details: { leader: leader.url },
    });
  }

  async leader(): Promise<LeaderInfo | undefined> {
    const rows: Array<{ holder: string; holder_url: string; term: string; expires_at: Date }> = await this.dataSource.query(
      'SELECT holder, holder_url, term, expires_at FROM leader_lease WHERE expires_at > now()',
    );
    const row = rows[0];
    return row && { holder: row.holder, url: row.holder_url, term: Number(row.term), expiresAt: row.expires_at.toISOString() };
  }

  onApplicationBootstrap(): void {
    this.loop = runPeriodically(
      () => this.renew(),
      this.settings.TESSERA_LEADER_RENEW_INTERVAL_MS,
      (error) => {
        this.logger.warn({ err: error }, `leader lease renewal failed: ${(error as Error).message}`);
        if (this.currentTerm !== undefined && Date.now() >= this.leaseValidUntil) this.stepDown('lease expired without renewal');
      },
    );
  }

  async onApplicationShutdown(): Promise<void> {
    this.loop?.stop();
    clearTimeout(this.expiry);
    if (this.currentTerm !== undefined) {
      this.stepDown(SHUTTING_DOWN);
      await this.transition;
      await this.dataSource.query('UPDATE leader_lease SET expires_at = now() WHERE holder = $1', [this.id]).catch(() => undefined);
    }
  }

  private async renew(): Promise<void> {
    const started = Date.now();
    const rows: Array<{ term: string }> = await this.dataSource.query(
      `INSERT INTO leader_lease (holder, holder_url, term, expires_at) VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
       ON CONFLICT (singleton) DO UPDATE SET
         holder = EXCLUDED.holder, holder_url = EXCLUDED.holder_url, expires_at = EXCLUDED.expires_at,
         term = CASE WHEN leader_lease.holder = EXCLUDED.holder AND leader_lease.expires_at >= now() THEN leader_lease.term ELSE leader_lease.term + 1 END
       WHERE leader_lease.holder = EXCLUDED.holder OR leader_lease.expires_at < now()
       RETURNING term`,
      [this.id, this.url, this.settings.TESSERA_LEADER_LEASE_MS],
    );
    const term = rows[0] === undefined ? undefined : Number(rows[0].term);
    if (term === undefined) {
      if (this.currentTerm !== undefined) this.stepDown('another process holds the lease');
      return;
    }
    // Counted from before the statement, so this process's view never outlives the row's.
    this.leaseValidUntil = started + this.settings.TESSERA_LEADER_LEASE_MS;
    // Step down when the lease runs out unless a renewal comes first, even if renewals hang.
    clearTimeout(this.expiry);
    this.expiry = setTimeout(
      () => {
        if (this.currentTerm !== undefined && Date.now() >= this.leaseValidUntil) this.stepDown('lease expired without renewal');
      },
      Math.max(0, this.leaseValidUntil - Date.now()),
    );
    this.expiry.unref();
    if (this.currentTerm !== term) {
      if (this.currentTerm !== undefined) this.stepDown(`a new term ${term} began`);
      this.becomeLeader(term);
    }
  }

  private becomeLeader(term: number): void {
    this.currentTerm = term;
    this.logger.info({ term }, `became the config leader (term ${term})`);
    this.transition = this.transition.then(async () => {
      for (const service of this.services) {
        await service
          .startAsLeader(term)
          .catch((error: unknown) => this.logger.error({ err: error, service: service.name }, 'leader service failed to start'));
      }
      if (this.currentTerm === term) this.startedTerm = term;
    });
  }

  private stepDown(reason: string): void {
    const level = reason === SHUTTING_DOWN ? 'info' : 'warn';
    this.logger[level]({ term: this.currentTerm }, `no longer the config leader: ${reason}`);
    this.currentTerm = undefined;
    this.startedTerm = undefined;
    this.leaseValidUntil = 0;
    this.transition = this.transition.then(async () => {
      for (const service of this.services) {
        await service
          .stopAsLeader()
          .catch((error: unknown) => this.logger.error({ err: error, service: service.name }, 'leader service failed to stop'));
      }
    });
  }
}
