import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { SETTINGS, advertisedUrl } from '@tessera/platform';
import { type ClusterEvent, topicsOfKind } from '@tessera/protocol';
import type { ConfigSettings } from '../config.settings.js';

/** One changelog row (MongoDB's config.changelog): what happened, to which namespace, on which shard. */
export interface ChangelogEntry {
  what: string;
  ns?: string;
  shard?: string;
  details?: Record<string, unknown>;
}

/** A changelog row as Postgres returns it. */
export interface ChangelogRow {
  id: string;
  seq: string | number | null;
  time: Date | string;
  server: string;
  shard: string | null;
  what: string;
  ns: string | null;
  details: Record<string, unknown>;
}

/**
 * The one place that writes the changelog, and so the one source of events: a row written here
 * inside the transaction of the change it describes is, when that transaction commits, given
 * the next cluster-wide `seq` and published with NOTIFY (see the migration
 * 1763900900000-event-sequence and control-plane/README.md). Both land, or neither.
 */
@Injectable()
export class ChangelogService {
  private readonly server: string;

  constructor(
    @Inject(SETTINGS) settings: Pick<ConfigSettings, 'TESSERA_NODE_NAME' | 'TESSERA_HOST' | 'TESSERA_PORT' | 'TESSERA_ADVERTISE_URL'>,
  ) {
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

/** The event a changelog row is. Rows not yet committed have no `seq` and are never events. */
export function eventOfRow(row: ChangelogRow): ClusterEvent {
  return {
    seq: Number(row.seq),
    time: new Date(row.time).toISOString(),
    kind: row.what,
    topics: topicsOfKind(row.what),
    ns: row.ns,
    shard: row.shard,
    server: row.server,
    details: row.details,
  };
}
