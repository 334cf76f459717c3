import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { LOGGER, type Periodic, SETTINGS, runPeriodically } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';

/** A held distributed lock; release it when the work is done. */
export interface DistLock {
  resource: string;
  operation: string;
  release(): Promise<void>;
}

/**
 * Distributed locks on string resources (a database or collection name), MongoDB's config.locks
 * with config.lockpings: a lock row names the process and operation holding it; the process
 * keeps its lockpings row fresh. A lock is free when there is no row, when the row belongs to
 * the same operation (so a resumed DDL coordinator takes its own locks back), or when its
 * process has not pinged for `TESSERA_LOCK_TAKEOVER_MS` (it is presumed dead and the lock is
 * taken over). A busy lock is retried every 100 ms and answers `LOCK_BUSY` after the wait.
 *
 * As in MongoDB (and as Kleppmann's essay on distributed locking warns) a holder that was only
 * paused may still believe it holds an overtaken lock; DDL phases are idempotent and checkpoint
 * under the leader term so that such a holder's work is fenced off.
 */
@Injectable()
export class DistLockService implements OnApplicationBootstrap, OnApplicationShutdown {
  /** This process's identity in config.lockpings. */
  readonly process = `${process.pid}-${randomUUID().slice(0, 8)}`;
  private pinger: Periodic | undefined;

  constructor(
    private readonly dataSource: DataSource,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    this.pinger = runPeriodically(
      () => this.ping(),
      this.settings.TESSERA_LOCK_PING_INTERVAL_MS,
      (error) => this.logger.warn({ err: error }, 'lock ping failed'),
    );
  }

  onApplicationShutdown(): void {
    this.pinger?.stop();
  }

  async ping(): Promise<void> {
    await this.dataSource.query(
      'INSERT INTO lockpings (process, ping) VALUES ($1, now()) ON CONFLICT (process) DO UPDATE SET ping = now()',
      [this.process],
    );
  }

  /**
   * Takes the lock on `resource` for `operation`, waiting up to `waitMs` (default
   * `TESSERA_LOCK_WAIT_MS`). Resolves with the held lock; rejects with `LOCK_BUSY` naming the
   * holder when the wait runs out.
   */
  async acquire(resource: string, operation: string, why: string, waitMs = this.settings.TESSERA_LOCK_WAIT_MS): Promise<DistLock> {
    const deadline = Date.now() + waitMs;
    await this.ping();
    for (;;) {
      const taken: Array<{ process: string }> = await this.dataSource.query(
        `INSERT INTO locks (resource, process, operation, why) VALUES ($1, $2, $3, $4)
         ON CONFLICT (resource) DO UPDATE SET process = EXCLUDED.process, operation = EXCLUDED.operation, why = EXCLUDED.why, acquired_at = now()
         WHERE locks.operation = EXCLUDED.operation
            OR NOT EXISTS (SELECT 1 FROM lockpings p WHERE p.process = locks.process AND p.ping > now() - $5 * interval '1 millisecond')
         RETURNING process`,
        [resource, this.process, operation, why, this.settings.TESSERA_LOCK_TAKEOVER_MS],
      );
      if (taken.length === 1) return { resource, operation, release: () => this.release(resource, operation) };
      if (Date.now() >= deadline) {
        const holder: Array<{ why: string; process: string }> = await this.dataSource.query(
          'SELECT why, process FROM locks WHERE resource = $1',
          [resource],
        );
        throw new TesseraError(
          'LOCK_BUSY',
          `the lock on "${resource}" is held by another operation (${holder[0]?.why ?? 'just released'}); waited ${waitMs} ms`,
          {
            details: { resource, holder: holder[0] ?? null },
          },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Releases the lock if this operation still holds it in this process; a no-op otherwise. */
  async release(resource: string, operation: string): Promise<void> {
    // Only this process's hold: a coordinator resumed elsewhere holds the lock under the same
    // operation, and a deposed process must not free it.
    await this.dataSource.query('DELETE FROM locks WHERE resource = $1 AND operation = $2 AND process = $3', [
      resource,
      operation,
      this.process,
    ]);
  }
}
