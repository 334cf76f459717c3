import { Injectable } from '@nestjs/common';
import { type Chunk, type ChunkRange, type CollectionGeneration, type ShardKey, type ShardKeyPattern, encodeKey } from '@tessera/core';
import { type Queryable, queryRows } from '@tessera/platform';
import { type ChunkRow, type CollectionRow, chunkFromRow, insertChunkRows } from './catalog-rows.js';

/** A collection's chunks as a commit sees them, inside its transaction (which holds the collection's row lock). */
export interface ChunkScope {
  db: Queryable;
  row: CollectionRow;
  generation: CollectionGeneration;
}

/** A chunk's size as a shard last measured it (`documents` when it counted them too). */
export interface SizeEstimate {
  bytes: number;
  documents: number | null;
}

/** A chunk with its row id and its size estimate, if it has one. */
export interface StoredChunk {
  chunk: Chunk;
  id: string;
  estimate: SizeEstimate | undefined;
}

/**
 * The chunk rows the metadata commits read and write (MongoDB's config.chunks), always inside
 * the caller's transaction: every function takes the scope of a collection whose row the caller
 * has locked, so reads and writes see and leave one consistent routing table.
 */
@Injectable()
export class ChunkCatalogStore {
  /** The chunk holding `range.min` (the last chunk starting at or below it), through the min index. */
  async holding(scope: ChunkScope, range: ChunkRange, lock: '' | 'FOR UPDATE' = ''): Promise<StoredChunk | undefined> {
    const rows = await queryRows<ChunkRow>(
      scope.db,
      `SELECT * FROM chunks WHERE collection_uuid = $1 AND min <= $2 ORDER BY min DESC LIMIT 1 ${lock}`,
      [scope.row.uuid, bytes(range.min)],
    );
    const row = rows[0];
    return row && stored(row, scope.generation);
  }

  /** The chunk holding `range.min`, then every chunk starting below `range.max`, in key order (a merge's run). */
  async covering(scope: ChunkScope, range: ChunkRange): Promise<StoredChunk[]> {
    const rows = await queryRows<ChunkRow>(
      scope.db,
      `SELECT * FROM chunks WHERE collection_uuid = $1 AND min < $3
         AND min >= (SELECT min FROM chunks WHERE collection_uuid = $1 AND min <= $2 ORDER BY min DESC LIMIT 1)
       ORDER BY min`,
      [scope.row.uuid, bytes(range.min), bytes(range.max)],
    );
    return rows.map((row) => stored(row, scope.generation));
  }

  /** Another chunk `shard` owns besides chunk `id` (a migration's control chunk). */
  async another(scope: ChunkScope, shard: string, id: string): Promise<StoredChunk | undefined> {
    const rows = await queryRows<ChunkRow>(
      scope.db,
      'SELECT * FROM chunks WHERE collection_uuid = $1 AND shard = $2 AND id <> $3 LIMIT 1',
      [scope.row.uuid, shard, id],
    );
    const row = rows[0];
    return row && stored(row, scope.generation);
  }

  /** The migration whose range overlaps `range`, if any (active_migrations). */
  async migrationOverlapping(scope: ChunkScope, range: ChunkRange): Promise<string | undefined> {
    const rows = await queryRows<{ id: string }>(
      scope.db,
      'SELECT id FROM active_migrations WHERE collection_uuid = $1 AND min < $3 AND max > $2 LIMIT 1',
      [scope.row.uuid, bytes(range.min), bytes(range.max)],
    );
    return rows[0]?.id;
  }

  /** Replaces the chunks with row ids `ids` by `chunks` (a split's pieces, a merge's result). */
  async replace(scope: ChunkScope, pattern: ShardKeyPattern, ids: readonly string[], chunks: readonly Chunk[]): Promise<void> {
    await scope.db.query('DELETE FROM chunks WHERE id = ANY($1::bigint[])', [ids]);
    await insertChunkRows(scope.db, scope.row.uuid, pattern, chunks);
  }

  /** Writes a moved chunk's shard, version and history. */
  async move(scope: ChunkScope, id: string, moved: Chunk): Promise<void> {
    await scope.db.query('UPDATE chunks SET shard = $2, major = $3, minor = $4, history = $5 WHERE id = $1', [
      id,
      moved.shard,
      moved.version.major,
      moved.version.minor,
      JSON.stringify(moved.history),
    ]);
  }

  /** Writes a chunk's version (a control chunk's bump, a cleared jumbo flag's). */
  async setVersion(scope: ChunkScope, id: string, chunk: Chunk, extra: { jumbo?: boolean } = {}): Promise<void> {
    const jumbo = extra.jumbo === undefined ? '' : `, jumbo = ${extra.jumbo ? 'true' : 'false'}`;
    await scope.db.query(`UPDATE chunks SET major = $2, minor = $3${jumbo} WHERE id = $1`, [id, chunk.version.major, chunk.version.minor]);
  }

  async markJumbo(scope: ChunkScope, id: string): Promise<void> {
    await scope.db.query('UPDATE chunks SET jumbo = true WHERE id = $1', [id]);
  }

  /** Writes chunk `id`'s size estimate; both columns at once, as they describe one measurement. */
  async recordSizeEstimate(scope: ChunkScope, id: string, estimate: SizeEstimate): Promise<void> {
    await scope.db.query('UPDATE chunks SET estimated_size_bytes = $2, estimated_documents = $3 WHERE id = $1', [
      id,
      estimate.bytes,
      estimate.documents,
    ]);
  }

  /** Writes the size estimate of the chunk starting at `min` (one `replace` just wrote). */
  async recordSizeEstimateAt(scope: ChunkScope, min: ShardKey, estimate: SizeEstimate): Promise<void> {
    await scope.db.query('UPDATE chunks SET estimated_size_bytes = $3, estimated_documents = $4 WHERE collection_uuid = $1 AND min = $2', [
      scope.row.uuid,
      bytes(min),
      estimate.bytes,
      estimate.documents,
    ]);
  }

  /** Whether `shard` is registered, holding it (KEY SHARE) so that it cannot be removed before the caller's transaction ends. */
  async holdShard(scope: Pick<ChunkScope, 'db'>, shard: string): Promise<boolean> {
    return (await queryRows(scope.db, 'SELECT name FROM shards WHERE name = $1 FOR KEY SHARE', [shard])).length > 0;
  }
}

function stored(row: ChunkRow, generation: CollectionGeneration): StoredChunk {
  return { chunk: chunkFromRow(row, generation), id: row.id, estimate: estimateOfRow(row) };
}

/** A chunk row's size estimate; none without a byte estimate. */
export function estimateOfRow(row: Pick<ChunkRow, 'estimated_size_bytes' | 'estimated_documents'>): SizeEstimate | undefined {
  if (row.estimated_size_bytes == null) return undefined;
  return {
    bytes: Number(row.estimated_size_bytes),
    documents: row.estimated_documents == null ? null : Number(row.estimated_documents),
  };
}

function bytes(key: ShardKey): Buffer {
  return Buffer.from(encodeKey(key));
}
