import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { TesseraError, type Value, type ValueObject } from '@tessera/core';
import { isDocument } from '@tessera/query';
import { errorFromPublic, toWire } from '../api/extended-json.js';
import { databaseOf, namespaceOf } from '../api/namespace.js';
import { IndexesService } from '../indexes/indexes.service.js';
import { ClusterRoutingService } from '../routing/cluster-routing.service.js';
import { WriteService } from '../writes/write.service.js';
import { emptyIfMissing } from './query.service.js';

/** Results `$out` inserts per insert command. */
const INSERT_BATCH = 1_000;

/**
 * Reads a `$out` stage: `"coll"` or `{ db, coll }` of the aggregate's database. Throws
 * `BAD_VALUE` for a malformed one and `ILLEGAL_OPERATION` for another database (a rename does
 * not cross databases); `INVALID_NAMESPACE` as `namespaceOf`.
 */
export function parseOutStage(spec: Value | undefined, sourceNs: string): string {
  const db = databaseOf(sourceNs);
  const target =
    typeof spec === 'string' ? { db, coll: spec } : isDocument(spec) ? { db: spec['db'] ?? db, coll: spec['coll'] } : undefined;
  if (target === undefined || typeof target.db !== 'string' || typeof target.coll !== 'string')
    throw new TesseraError('BAD_VALUE', '$out takes a collection name or { db, coll }', { details: { field: 'pipeline.$out' } });
  if (target.db !== db)
    throw new TesseraError('ILLEGAL_OPERATION', `$out to another database (${target.db}) is not supported: it renames within ${db}`, {
      details: { field: 'pipeline.$out' },
    });
  return namespaceOf(target.db, target.coll);
}

/**
 * MongoDB's `$out`: the results replace the target collection at once. They are written to a
 * new collection `tmp.agg_out.<uuid>` of the database, which first gets the target's secondary
 * indexes, and that collection is then renamed over the target (`renameCollection` with
 * `dropTarget`, one transaction on the database's primary shard). A reader sees the old
 * collection or the new one, never a part; a `$out` that fails drops its temporary collection
 * and leaves the target as it was. The target may not be sharded, as in MongoDB.
 */
@Injectable()
export class OutStage {
  constructor(
    private readonly cluster: ClusterRoutingService,
    private readonly writes: WriteService,
    private readonly indexes: IndexesService,
  ) {}

  async replace(targetNs: string, results: readonly ValueObject[]): Promise<void> {
    const routing = await this.cluster.routingForWrite(targetNs);
    if (routing.kind === 'sharded')
      throw new TesseraError('ILLEGAL_OPERATION', `$out cannot write to ${targetNs}: it is sharded`, { details: { ns: targetNs } });
    const temp = `${databaseOf(targetNs)}.tmp.agg_out.${randomUUID().replaceAll('-', '')}`;
    try {
      await this.createLike(temp, targetNs, routing.primaryShard);
      for (let start = 0; start < results.length; start += INSERT_BATCH) {
        const documents = results.slice(start, start + INSERT_BATCH).map((d) => toWire(d) as Record<string, unknown>);
        const inserted = await this.writes.insert(temp, { documents, ordered: true });
        if (inserted.writeErrors[0] !== undefined) throw errorFromPublic(inserted.writeErrors[0]);
      }
      await this.cluster.renameCollection(temp, targetNs, true);
    } catch (error) {
      await this.cluster.dropCollection(temp).catch(() => undefined);
      throw error;
    }
  }

  /** Creates the temporary collection on the primary, with the target's secondary indexes when it exists. */
  private async createLike(temp: string, targetNs: string, primary: string): Promise<void> {
    await (await this.cluster.shard(primary)).createCollection(randomUUID(), { ns: temp, keyPattern: { _id: 1 } });
    const listed = await emptyIfMissing(this.indexes.listIndexes(targetNs), undefined);
    const secondary = (listed?.cursor.firstBatch ?? [])
      .filter((index) => index.name !== '_id_')
      .map(({ key, name, unique }) => ({ key, name, ...(unique ? { unique } : {}) }));
    if (secondary.length > 0) await this.indexes.createIndexes(temp, { indexes: secondary });
  }
}
