import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { queryRows } from '@tessera/platform';

/** The current version of a captured document, and whether it is still in the donated range. */
export interface CurrentVersion {
  i: string;
  k: string;
  size: number;
  d: string;
  inside: boolean;
}

/**
 * `migration_mods`, the writes the capture trigger records for a donated range, and the reads of
 * their documents' current versions: what `transferMods` serves the recipient.
 */
@Injectable()
export class MigrationModsStore {
  constructor(private readonly dataSource: DataSource) {}

  /** Takes (deletes and answers) the oldest `limit` captured writes of the migration, in order. */
  async take(migrationId: string, limit: number): Promise<Buffer[]> {
    const captured = await queryRows<{ id: Buffer }>(
      this.dataSource,
      `DELETE FROM migration_mods WHERE seq IN (SELECT seq FROM migration_mods WHERE migration_id = $1 ORDER BY seq LIMIT $2) RETURNING id`,
      [migrationId, limit],
    );
    return captured.map((c) => c.id);
  }

  /** The stored documents of `ids` in `table`, each marked with whether it lies in [min, max). */
  currentVersions(table: string, ids: readonly Buffer[], min: Buffer, max: Buffer): Promise<CurrentVersion[]> {
    return this.dataSource.query(
      `SELECT encode(id, 'hex') AS i, encode(shard_key, 'hex') AS k, size, doc::text AS d, (shard_key >= $2 AND shard_key < $3) AS inside
       FROM ${table} WHERE id = ANY($1)`,
      [ids, min, max],
    );
  }
}
