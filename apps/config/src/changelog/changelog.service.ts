import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { SETTINGS, advertisedUrl } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';

/** One changelog row (MongoDB's config.changelog): what happened, to which namespace, on which shard. */
export interface ChangelogEntry {
  what: string;
  ns?: string;
  shard?: string;
  details?: Record<string, unknown>;
}

/** Writes the changelog inside the transaction of the change it describes, so both or neither land. */
@Injectable()
export class ChangelogService {
  private readonly server: string;

  constructor(@Inject(SETTINGS) settings: ConfigSettings) {
    this.server = settings.TESSERA_NODE_NAME ?? advertisedUrl(settings);
  }

  async record(manager: EntityManager, entry: ChangelogEntry): Promise<void> {
    await manager.query('INSERT INTO changelog (server, shard, what, ns, details) VALUES ($1, $2, $3, $4, $5)', [
      this.server,
      entry.shard ?? null,
      entry.what,
      entry.ns ?? null,
      JSON.stringify(entry.details ?? {}),
    ]);
  }
}
