import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { DataSource, type EntityManager } from 'typeorm';
import {
  type ChunkRange,
  type ShardKey,
  type ShardKeyPattern,
  TesseraError,
  type Value,
  type ValueObject,
  encodeKey,
  fromExtendedJsonObject,
  makeChunkRange,
  parseShardKeyPattern,
  shardKeyFromObject,
  typeBracketOf,
} from '@tessera/core';
import {
  type ShardZoneRequest,
  type UpdateZoneKeyRangeRequest,
  shardZoneRequestSchema,
  updateZoneKeyRangeRequestSchema,
} from '@tessera/protocol';
import { parseWith, queryRows } from '@tessera/platform';
import { type CollectionRow, keyPatternOfRow, readableKey } from '../catalog/catalog-rows.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { databaseLock, databaseOf } from '../catalog/namespace.js';
import { DistLockService } from '../locks/dist-lock.service.js';
import { LeaderService } from '../leader/leader.service.js';
import { SHARDS_RESOURCE } from '../shards/shard-registry.service.js';

/**
 * Zones (MongoDB's tags): shards are assigned zone names, and key ranges of a namespace are
 * assigned to zones; the balancer (a later issue) keeps each range's chunks on its zone's
 * shards. Ranges are `[min, max)` in the shard key's order and never overlap within a namespace.
 */
@Injectable()
export class ZonesService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly leader: LeaderService,
    private readonly locks: DistLockService,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
  ) {}

  /** Assigns `zone` to `shard`; assigning it again is a no-op. */
  async addShardToZone(input: ShardZoneRequest): Promise<{ zones: string[] }> {
    const { shard, zone } = parseWith(shardZoneRequestSchema, input, 'addShardToZone request');
    return this.underLocks([SHARDS_RESOURCE], `addShardToZone ${shard} ${zone}`, async (manager) => {
      const zones = await this.zonesOf(manager, shard);
      if (zones.includes(zone)) return { zones };
      const updated: Array<{ zones: string[] }> = await queryRows(
        manager,
        'UPDATE shards SET zones = array_append(zones, $2) WHERE name = $1 RETURNING zones',
        [shard, zone],
      );
      await this.clock.tick(manager);
      await this.changelog.record(manager, { what: 'addShardToZone', shard, details: { zone } });
      return { zones: updated[0]!.zones };
    });
  }

  /**
   * Removes `zone` from `shard`. Refused when ranges still belong to the zone and this shard is
   * the last one in it, since those ranges would have nowhere to live.
   */
  async removeShardFromZone(input: ShardZoneRequest): Promise<{ zones: string[] }> {
    const { shard, zone } = parseWith(shardZoneRequestSchema, input, 'removeShardFromZone request');
    return this.underLocks([SHARDS_RESOURCE], `removeShardFromZone ${shard} ${zone}`, async (manager) => {
      const zones = await this.zonesOf(manager, shard);
      if (!zones.includes(zone)) return { zones };
      const others: unknown[] = await manager.query('SELECT 1 FROM shards WHERE name <> $1 AND $2 = ANY(zones)', [shard, zone]);
      const ranges: Array<{ ns: string; min_ejson: string }> = await manager.query(
        'SELECT ns, min_ejson FROM tags WHERE tag = $1 LIMIT 1',
        [zone],
      );
      if (others.length === 0 && ranges[0] !== undefined) {
        throw new TesseraError(
          'ILLEGAL_OPERATION',
          `shard "${shard}" is the last shard in zone "${zone}", which still has ranges (e.g. ${ranges[0].ns} from ${ranges[0].min_ejson}); remove them first`,
          {
            details: { shard, zone, ns: ranges[0].ns },
          },
        );
      }
      const updated: Array<{ zones: string[] }> = await queryRows(
        manager,
        'UPDATE shards SET zones = array_remove(zones, $2) WHERE name = $1 RETURNING zones',
        [shard, zone],
      );
      await this.clock.tick(manager);
      await this.changelog.record(manager, { what: 'removeShardFromZone', shard, details: { zone } });
      return { zones: updated[0]!.zones };
    });
  }

  /**
   * Assigns the range `[min, max)` of `ns` to `zone`, or removes it when `zone` is null. The
   * bounds must name exactly the shard key's fields (for a collection not sharded yet, the same
   * fields in min and max), min < max, hashed fields bounded by NumberLong, MinKey or MaxKey,
   * and the zone must belong to a shard. A range overlapping another is refused, except the
   * very same range, which is re-assigned. Removing a range that does not exist is a no-op.
   */
  async updateZoneKeyRange(input: UpdateZoneKeyRangeRequest): Promise<{ ok: 1 }> {
    const request = parseWith(updateZoneKeyRangeRequestSchema, input, 'updateZoneKeyRange request');
    return this.underLocks(
      [databaseLock(databaseOf(request.ns)), request.ns, SHARDS_RESOURCE],
      `updateZoneKeyRange ${request.ns}`,
      async (manager) => {
        const pattern = await this.patternFor(manager, request.ns, request.min, request.max);
        const range = makeChunkRange(boundOf(pattern, request.min, 'min'), boundOf(pattern, request.max, 'max'));
        const min = Buffer.from(encodeKey(range.min));
        const max = Buffer.from(encodeKey(range.max));
        if (request.zone === null) {
          const removed: unknown[] = await queryRows(manager, 'DELETE FROM tags WHERE ns = $1 AND min = $2 AND max = $3 RETURNING tag', [
            request.ns,
            min,
            max,
          ]);
          if (removed.length > 0) await this.recordRangeChange(manager, request.ns, pattern, range, null);
          return { ok: 1 as const };
        }
        const holders: unknown[] = await manager.query('SELECT 1 FROM shards WHERE $1 = ANY(zones)', [request.zone]);
        if (holders.length === 0) {
          throw new TesseraError('NOT_FOUND', `zone "${request.zone}" is not assigned to any shard; use addShardToZone first`, {
            details: { zone: request.zone },
          });
        }
        const overlapping: Array<{ min: Buffer; max: Buffer; min_ejson: string; max_ejson: string; tag: string }> = await manager.query(
          'SELECT min, max, min_ejson, max_ejson, tag FROM tags WHERE ns = $1 AND min < $3 AND max > $2',
          [request.ns, min, max],
        );
        const same = overlapping.length === 1 && overlapping[0]!.min.equals(min) && overlapping[0]!.max.equals(max);
        if (overlapping.length > 0 && !same) {
          const other = overlapping[0]!;
          throw new TesseraError(
            'BAD_VALUE',
            `zone range [${readableKey(pattern, range.min)}, ${readableKey(pattern, range.max)}) overlaps range [${other.min_ejson}, ${other.max_ejson}) of zone "${other.tag}"`,
            {
              details: { ns: request.ns, overlaps: { min: other.min_ejson, max: other.max_ejson, zone: other.tag } },
            },
          );
        }
        await manager.query(
          `INSERT INTO tags (ns, min, max, min_ejson, max_ejson, tag) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (ns, min) DO UPDATE SET tag = EXCLUDED.tag`,
          [request.ns, min, max, readableKey(pattern, range.min), readableKey(pattern, range.max), request.zone],
        );
        await this.recordRangeChange(manager, request.ns, pattern, range, request.zone);
        return { ok: 1 as const };
      },
    );
  }

  private async recordRangeChange(
    manager: EntityManager,
    ns: string,
    pattern: ShardKeyPattern,
    range: ChunkRange,
    zone: string | null,
  ): Promise<void> {
    await this.clock.tick(manager);
    await this.changelog.record(manager, {
      what: zone === null ? 'removeZoneKeyRange' : 'updateZoneKeyRange',
      ns,
      details: { min: readableKey(pattern, range.min), max: readableKey(pattern, range.max), zone },
    });
  }

  private async patternFor(
    manager: EntityManager,
    ns: string,
    min: Record<string, unknown>,
    max: Record<string, unknown>,
  ): Promise<ShardKeyPattern> {
    const rows: CollectionRow[] = await manager.query('SELECT * FROM collections WHERE ns = $1', [ns]);
    if (rows[0] !== undefined) return keyPatternOfRow(rows[0]);
    if (!isDeepStrictEqual(Object.keys(min), Object.keys(max))) {
      throw new TesseraError(
        'BAD_VALUE',
        `zone range bounds must name the same fields in the same order, got ${JSON.stringify(Object.keys(min))} and ${JSON.stringify(Object.keys(max))}`,
      );
    }
    return parseShardKeyPattern(Object.fromEntries(Object.keys(min).map((field) => [field, 1])));
  }

  private async zonesOf(manager: EntityManager, shard: string): Promise<string[]> {
    const rows: Array<{ zones: string[] }> = await manager.query('SELECT zones FROM shards WHERE name = $1 FOR NO KEY UPDATE', [shard]);
    if (rows[0] === undefined) throw new TesseraError('SHARD_NOT_FOUND', `no shard named "${shard}"`, { details: { shard } });
    return rows[0].zones;
  }

  private async underLocks<T>(resources: string[], why: string, work: (manager: EntityManager) => Promise<T>): Promise<T> {
    await this.leader.assertLeader();
    const operation = randomUUID();
    const held = [];
    try {
      for (const resource of resources) held.push(await this.locks.acquire(resource, operation, why));
      return await this.dataSource.transaction(work);
    } finally {
      for (const lock of held.reverse()) await lock.release();
    }
  }
}

function boundOf(pattern: ShardKeyPattern, object: Record<string, unknown>, which: 'min' | 'max'): ShardKey {
  const key = shardKeyFromObject(pattern, fromExtendedJsonObject(object) as ValueObject as Readonly<Record<string, Value>>);
  pattern.fields.forEach((field, i) => {
    const bracket = typeBracketOf(key[i]!);
    if (field.hashed && bracket !== 'number' && bracket !== 'minKey' && bracket !== 'maxKey') {
      throw new TesseraError('BAD_VALUE', `zone range ${which} for hashed field "${field.path}" must be a NumberLong, MinKey or MaxKey`, {
        details: { field: field.path },
      });
    }
  });
  return key;
}
