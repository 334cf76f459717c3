import { Injectable } from '@nestjs/common';
import { TesseraError, type Value } from '@tessera/core';
import { type PublicWriteError, documentIdFromPath, errorFromPublic, toWire } from '../api/extended-json.js';
import { QueryService } from '../reads/query.service.js';
import { WriteService } from '../writes/write.service.js';

/**
 * The single-document REST convenience routes, built on the batch operations. `{id}` is read
 * by `documentIdFromPath`. On a sharded collection whose shard key is not `_id`, a write by
 * `_id` runs as a write without shard key (`WriteWithoutShardKeyService`).
 */
@Injectable()
export class DocumentsService {
  constructor(
    private readonly queries: QueryService,
    private readonly writes: WriteService,
  ) {}

  async create(ns: string, document: Record<string, unknown>): Promise<{ insertedId: unknown; ok: 1 }> {
    const result = await this.writes.insert(ns, { documents: [document], ordered: true });
    throwFirstWriteError(result.writeErrors);
    return { insertedId: result.insertedIds['0'], ok: 1 };
  }

  async get(ns: string, id: string): Promise<unknown> {
    const _id = documentIdFromPath(id);
    const found = await this.queries.find(ns, { filter: toWire({ _id }) as Record<string, unknown>, limit: 1, batchSize: 1 });
    const document = found.cursor.firstBatch?.[0];
    if (document === undefined) throw notFound(ns, _id);
    return document;
  }

  /** Replaces the document (PUT); `NOT_FOUND` when there is none. */
  async replace(
    ns: string,
    id: string,
    replacement: Record<string, unknown>,
  ): Promise<{ matchedCount: number; modifiedCount: number; ok: 1 }> {
    if (Object.keys(replacement).some((k) => k.startsWith('$'))) {
      throw new TesseraError('BAD_VALUE', 'A replacement document (PUT) cannot contain update operators; use PATCH.', {
        details: { field: '(root)' },
      });
    }
    return this.updateOne(ns, id, replacement);
  }

  /** Updates the document (PATCH): a body without `$` operators is `{ $set: body }`, else the body is the update. */
  async patch(ns: string, id: string, body: Record<string, unknown>): Promise<{ matchedCount: number; modifiedCount: number; ok: 1 }> {
    const keys = Object.keys(body);
    const update = keys.length > 0 && keys.every((k) => k.startsWith('$')) ? body : { $set: body };
    return this.updateOne(ns, id, update);
  }

  async remove(ns: string, id: string): Promise<{ deletedCount: number; ok: 1 }> {
    const q = byId(id);
    const result = await this.writes.delete(ns, { deletes: [{ q, limit: 1 }], ordered: true });
    throwFirstWriteError(result.writeErrors);
    if (result.deletedCount === 0) throw notFound(ns, documentIdFromPath(id));
    return { deletedCount: result.deletedCount, ok: 1 };
  }

  private async updateOne(ns: string, id: string, u: Record<string, unknown>) {
    const q = byId(id);
    const result = await this.writes.update(ns, { updates: [{ q, u, multi: false, upsert: false }], ordered: true });
    throwFirstWriteError(result.writeErrors);
    if (result.matchedCount === 0) throw notFound(ns, documentIdFromPath(id));
    return { matchedCount: result.matchedCount, modifiedCount: result.modifiedCount, ok: 1 as const };
  }
}

/** The filter `{_id}` of the document `{id}` names (wire form). */
function byId(id: string): Record<string, unknown> {
  return toWire({ _id: documentIdFromPath(id) }) as Record<string, unknown>;
}

function throwFirstWriteError(errors: readonly PublicWriteError[]): void {
  const first = errors[0];
  if (first !== undefined) throw errorFromPublic(first);
}

function notFound(ns: string, _id: Value): TesseraError {
  return new TesseraError('NOT_FOUND', `no document with _id ${JSON.stringify(toWire(_id))} in ${ns}`, {
    details: { namespace: ns, _id: toWire(_id) },
  });
}
