import { randomBytes } from 'node:crypto';
import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { LOGGER, SETTINGS } from '@tessera/platform';
import type { ClusterTimeKeys } from '@tessera/protocol';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { LeaderService } from '../leader/leader.service.js';
import { LeaderPeriodic } from '../leader/leader-periodic.js';
import { ClusterTimeKeysStore, type StoredKeyExpiry } from './cluster-time-keys.store.js';

/** The most the leader waits between two checks of the keys. */
const MAX_CHECK_INTERVAL_MS = 60_000;

/** HMAC-SHA1 keys are as long as its block needs no more than: 20 bytes, as MongoDB's. */
const KEY_BYTES = 20;

/**
 * MongoDB's KeysCollectionManager on the config leader (sharding-internals.md, "Key
 * management"): keeps two keys ahead, the one signing now and the next, each signing for
 * `TESSERA_KEYS_ROTATION_INTERVAL_SECS`; when the current one expires the next signs and a new
 * next is generated. A key verifies for one more interval after it stops signing, so a
 * ClusterTime signed just before a rotation still verifies everywhere. Each key generated is a
 * `clusterTimeKey.generated` changelog row (its id and expiry, never the secret).
 */
@Injectable()
export class ClusterTimeKeysService implements OnModuleInit, OnApplicationShutdown {
  private readonly loop: LeaderPeriodic;

  constructor(
    private readonly dataSource: DataSource,
    private readonly store: ClusterTimeKeysStore,
    private readonly changelog: ChangelogService,
    private readonly leader: LeaderService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.loop = new LeaderPeriodic(
      'cluster time keys',
      async () => void (await this.generateIfNeeded()),
      Math.min(MAX_CHECK_INTERVAL_MS, (this.interval * 1000) / 4),
      (error) => this.logger.warn({ err: error }, `generating cluster time keys failed: ${(error as Error).message}; will retry`),
    );
  }

  onModuleInit(): void {
    this.leader.register(this.loop);
  }

  onApplicationShutdown(): void {
    this.loop.stop();
  }

  /** Generates keys until one signs at `now` and the next is ready after it; answers the ids generated. */
  async generateIfNeeded(now: Date = new Date()): Promise<string[]> {
    const generated = await this.dataSource.transaction(async (manager) => {
      await this.store.lock(manager);
      const unexpired = await this.store.unexpired(manager, now);
      let lastExpiry = unexpired.at(-1)?.expiresAt ?? now;
      let keyId = (await this.store.highestKeyId(manager)) ?? BigInt(Math.floor(now.getTime() / 1000)) << 32n;
      const made: Array<{ keyId: string; expiresAt: Date }> = [];
      for (let count = unexpired.length; count < 2; count++) {
        keyId += 1n;
        lastExpiry = new Date(lastExpiry.getTime() + this.interval * 1000);
        await this.store.insert(manager, keyId, randomBytes(KEY_BYTES), lastExpiry);
        await this.changelog.record(manager, {
          what: 'clusterTimeKey.generated',
          details: { keyId: keyId.toString(), expiresAt: lastExpiry.toISOString() },
        });
        made.push({ keyId: keyId.toString(), expiresAt: lastExpiry });
      }
      return made;
    });
    for (const key of generated)
      this.logger.info(key, `generated cluster time key ${key.keyId}, signing until ${key.expiresAt.toISOString()}`);
    return generated.map((k) => k.keyId);
  }

  /** The keys that sign or still verify at `now`, with their secrets (the internal API's answer). */
  async keys(now: Date = new Date()): Promise<ClusterTimeKeys> {
    const keys = await this.store.since(this.dataSource.manager, new Date(now.getTime() - this.interval * 1000));
    return { keys, rotationIntervalSecs: this.interval };
  }

  /** Every key generated, newest first: ids and expiries only, for operators (the control plane). */
  async expiries(): Promise<StoredKeyExpiry[]> {
    return this.store.expiries(this.dataSource.manager);
  }

  private get interval(): number {
    return this.settings.TESSERA_KEYS_ROTATION_INTERVAL_SECS;
  }
}
