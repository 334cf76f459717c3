import type { ObjectId } from 'bson';
import type { DataSource, EntityManager } from 'typeorm';
import {
  TesseraError,
  type Value,
  type ValueObject,
  encodeKey,
  extractShardKey,
  fromExtendedJsonObject,
  toExtendedJsonObject,
  valuesEqual,
} from '@tessera/core';
import type { DeleteCommandResult, FindAndModifyResult, UpdateCommandResult, WriteErrorEntry } from '@tessera/protocol';
import {
  type ApplyUpdateOptions,
  applyUpdate,
  checkDocumentSize,
  compileProjection,
  projectionOptions,
  compileSort,
  isDocument,
  prepareInsert,
  updateChangesShardKey,
  upsertDocument,
} from '@tessera/query';
import { type StoredDocument, compileScanFilter, scanMatching } from './document-scan.js';
import { type CollectionHandle, inWriteTransaction, writeTimeOf } from './document-store.js';
import { type ImageKind, type StatementHistory, type StatementResult, recordedAs } from './statement-history.js';
import { addDocumentEntries, entriesOf, indexesForWrite, removeEntries, replaceEntries } from './index-maintenance.js';
import type { DeleteStatement, FindAndModifyRequest, UpdateStatement } from './write-statements.js';

interface Clock {
  now(): Date;
  generateId(): ObjectId;
}

/**
 * Updates, deletes and findAndModify on one collection's table. Each statement runs in a
 * transaction of its own that locks the documents it changes, so a statement applies whole or
 * not at all; a failed statement is a write error for its index, and an ordered batch stops
 * there (earlier statements stay, as in MongoDB). A shard key value changes only inside a
 * transaction (see `rewrite`).
 *
 * With a `history` (a retryable write) a statement that already executed answers its recorded
 * result instead of running, and each statement that runs is recorded in its own transaction.
 */
export class DocumentWrites {
  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
  ) {}

  /** A transaction of the command's write (see `inWriteTransaction`). */
  private transaction<T>(handle: CollectionHandle, work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return inWriteTransaction(this.dataSource, handle, work);
  }

  async update(
    handle: CollectionHandle,
    statements: readonly UpdateStatement[],
    ordered: boolean,
    history?: StatementHistory,
  ): Promise<UpdateCommandResult> {
    const result: UpdateCommandResult = { matchedCount: 0, modifiedCount: 0, upserted: [], writeErrors: [] };
    for (const [index, statement] of statements.entries()) {
      try {
        const recorded = history?.executed(index);
        const outcome =
          recorded !== undefined
            ? recordedAs(recorded, 'update', index)
            : await this.transaction(handle, async (manager) => {
                const { shardKey, ...answer } = await this.updateOne(manager, handle, statement, index);
                await history?.record(manager, [{ index, shardKey, result: answer }]);
                return answer;
              });
        result.matchedCount += outcome.n;
        result.modifiedCount += outcome.nModified;
        if (outcome.upserted !== undefined) result.upserted.push({ index, _id: outcome.upserted });
      } catch (error) {
        // In a transaction a failed statement ends the transaction: its error goes up whole.
        if (handle.transaction !== undefined) throw error;
        recordWriteError(result.writeErrors, index, error);
        if (ordered) break;
      }
    }
    return result;
  }

  async delete(
    handle: CollectionHandle,
    statements: readonly DeleteStatement[],
    ordered: boolean,
    history?: StatementHistory,
  ): Promise<DeleteCommandResult> {
    const result: DeleteCommandResult = { deletedCount: 0, writeErrors: [] };
    for (const [index, statement] of statements.entries()) {
      try {
        const recorded = history?.executed(index);
        result.deletedCount +=
          recorded !== undefined
            ? recordedAs(recorded, 'delete', index).n
            : await this.transaction(handle, async (manager) => {
                const compiled = compileScanFilter(statement.q, statement.collation, statement.variables);
                const matches = await scanMatching(manager, handle, compiled, {
                  forUpdate: true,
                  limit: statement.limit === 1 ? 1 : undefined,
                });
                if (matches.length > 0) await this.remove(manager, handle, matches);
                await history?.record(manager, [{ index, shardKey: matches[0]?.shardKey, result: { op: 'delete', n: matches.length } }]);
                return matches.length;
              });
      } catch (error) {
        // In a transaction a failed statement ends the transaction: its error goes up whole.
        if (handle.transaction !== undefined) throw error;
        recordWriteError(result.writeErrors, index, error);
        if (ordered) break;
      }
    }
    return result;
  }

  /**
   * MongoDB's findAndModify: the first match by `sort`, removed or updated, before or after.
   * A retried one answers the recorded image under the request's projection.
   */
  async findAndModify(handle: CollectionHandle, request: FindAndModifyRequest, history?: StatementHistory): Promise<FindAndModifyResult> {
    if (request.remove === (request.update !== undefined)) {
      throw new TesseraError('FAILED_TO_PARSE', 'findAndModify needs exactly one of remove: true and an update');
    }
    if (request.remove && (request.upsert || request.new))
      throw new TesseraError('FAILED_TO_PARSE', 'findAndModify cannot combine remove with upsert or new');
    const project = compileProjection(request.fields, projectionOptions(request.query, request.collation, request.variables));
    const answer = (returned: ValueObject | undefined) => (returned === undefined ? null : toExtendedJsonObject(project(returned)));
    const recorded = history?.executed(0);
    if (recorded !== undefined) {
      const retried = recordedAs(recorded, 'findAndModify', 0);
      return { value: answer(retriedImage(retried, history!, request)), lastErrorObject: retried.lastErrorObject };
    }
    return this.transaction(handle, async (manager) => {
      const outcome = await this.findAndModifyIn(manager, handle, request);
      const image = outcome.returned && { kind: imageKindOf(request), document: toExtendedJsonObject(outcome.returned) };
      await history?.record(
        manager,
        [
          {
            index: 0,
            shardKey: outcome.shardKey,
            result: { op: 'findAndModify', lastErrorObject: outcome.lastErrorObject, ...(image && { image: image.kind }) },
          },
        ],
        image,
      );
      return { value: answer(outcome.returned), lastErrorObject: outcome.lastErrorObject };
    });
  }

  /** findAndModify's write, in `manager`'s transaction: answers the document to return (unprojected), if any. */
  private async findAndModifyIn(
    manager: EntityManager,
    handle: CollectionHandle,
    request: FindAndModifyRequest,
  ): Promise<{
    returned: ValueObject | undefined;
    lastErrorObject: FindAndModifyResult['lastErrorObject'];
    shardKey: Uint8Array | undefined;
  }> {
    const sort = request.sort === undefined ? undefined : compileSort(request.sort, request.collation);
    const compiled = compileScanFilter(request.query, request.collation, request.variables);
    const matches = await scanMatching(manager, handle, compiled, { forUpdate: true, limit: sort ? undefined : 1 });
    if (sort) matches.sort((a, b) => sort(a.document, b.document));
    const target = matches[0];
    if (target === undefined) {
      if (!request.upsert) return { returned: undefined, lastErrorObject: { n: 0, updatedExisting: false }, shardKey: undefined };
      const inserted = await this.upsert(manager, handle, request.query, request.update, 0, request);
      return {
        returned: request.new ? inserted.document : undefined,
        lastErrorObject: { n: 1, updatedExisting: false, upserted: toExtendedJsonObject(inserted.document['_id'] as Value) },
        shardKey: inserted.shardKey,
      };
    }
    if (request.remove) {
      await this.remove(manager, handle, [target]);
      return { returned: target.document, lastErrorObject: { n: 1, updatedExisting: false }, shardKey: target.shardKey };
    }
    const after = await this.rewrite(manager, handle, target, request.update, 'refuse', updateOptions(request, request.query));
    return { returned: request.new ? after : target.document, lastErrorObject: { n: 1, updatedExisting: true }, shardKey: target.shardKey };
  }

  private async updateOne(
    manager: EntityManager,
    handle: CollectionHandle,
    statement: UpdateStatement,
    index: number,
  ): Promise<{ op: 'update'; n: number; nModified: number; upserted?: unknown; shardKey: Uint8Array | undefined }> {
    const matches = await scanMatching(manager, handle, compileScanFilter(statement.q, statement.collation, statement.variables), {
      forUpdate: true,
      limit: statement.multi ? undefined : 1,
    });
    if (matches.length === 0) {
      if (!statement.upsert) return { op: 'update', n: 0, nModified: 0, shardKey: undefined };
      const inserted = await this.upsert(manager, handle, statement.q, statement.u, index, statement);
      return {
        op: 'update',
        n: 0,
        nModified: 0,
        upserted: toExtendedJsonObject(inserted.document['_id'] as Value),
        shardKey: inserted.shardKey,
      };
    }
    let modified = 0;
    const options = updateOptions(statement, statement.q);
    for (const match of matches) {
      const before = JSON.stringify(toExtendedJsonObject(match.document));
      const after = await this.rewrite(manager, handle, match, statement.u, statement.multi ? 'refuse' : 'move', options);
      if (JSON.stringify(toExtendedJsonObject(after)) !== before) modified++;
    }
    // A multi-document update is never retryable, so one shard key names the document written.
    return { op: 'update', n: matches.length, nModified: modified, shardKey: matches.length === 1 ? matches[0]!.shardKey : undefined };
  }

  /**
   * Applies `update` to a stored document and writes it back; returns the new document. A new
   * shard key value is taken only inside a transaction and by a single-document update
   * (`keyChange: 'move'`), as MongoDB has it: kept here when this shard owns the new value, and
   * otherwise answered `WouldChangeOwningShard` with both images, for the router to delete the
   * document here and insert it on its new owner in the same transaction.
   */
  private async rewrite(
    manager: EntityManager,
    handle: CollectionHandle,
    stored: StoredDocument,
    update: unknown,
    keyChange: 'move' | 'refuse',
    options: Omit<ApplyUpdateOptions, 'now'>,
  ): Promise<ValueObject> {
    const { doc: after, modified } = applyUpdate(stored.document, update, { now: this.clock.now(), ...options });
    if (!modified) return stored.document;
    if (!valuesEqual(stored.document['_id'] as Value, after['_id'] as Value)) {
      throw new TesseraError('IMMUTABLE_FIELD', "an update cannot change a document's _id");
    }
    const shardKey: Uint8Array = updateChangesShardKey(handle.pattern, stored.document, after)
      ? this.newShardKey(handle, stored, after, keyChange)
      : stored.shardKey;
    const size = checkDocumentSize(after);
    await manager.query(`UPDATE ${handle.table} SET doc = $2, size = $3, valid_from = $4, shard_key = $5 WHERE id = $1`, [
      stored.id,
      JSON.stringify(toExtendedJsonObject(after)),
      size,
      writeTimeOf(handle).sql,
      Buffer.from(shardKey),
    ]);
    await replaceEntries(manager, handle.ns, await indexesForWrite(manager, handle), stored.id, stored.document, after);
    handle.onWrite?.(shardKey, size);
    handle.transaction?.wrote(handle, stored.id, shardKey);
    // At prepare this shard must still own the value the document had, as well as the new one.
    if (shardKey !== stored.shardKey) handle.transaction?.wrote(handle, stored.id, stored.shardKey);
    return after;
  }

  /** The encoded shard key `after` takes, when this shard may keep the document under it (see `rewrite`). */
  private newShardKey(handle: CollectionHandle, stored: StoredDocument, after: ValueObject, keyChange: 'move' | 'refuse'): Uint8Array {
    const details = { namespace: handle.ns, shardKey: handle.pattern.fields.map((f) => f.path) };
    if (handle.transaction === undefined || keyChange === 'refuse') {
      throw new TesseraError(
        'ILLEGAL_OPERATION',
        `this update would change the shard key of a document in ${handle.ns}; a shard key value changes only in a single-document update (multi: false) inside a transaction`,
        { details },
      );
    }
    const key = encodeKey(extractShardKey(handle.pattern, after));
    if (handle.owns(key)) return key;
    throw new TesseraError('WOULD_CHANGE_OWNING_SHARD', `the update moves the document to the chunk of another shard`, {
      details: { ...details, preImage: toExtendedJsonObject(stored.document), postImage: toExtendedJsonObject(after) },
    });
  }

  private async upsert(
    manager: EntityManager,
    handle: CollectionHandle,
    query: ValueObject,
    update: unknown,
    index: number,
    options: Pick<UpdateStatement, 'arrayFilters' | 'variables' | 'upsertSupplied'>,
  ): Promise<{ document: ValueObject; shardKey: Uint8Array }> {
    const { arrayFilters, variables } = options;
    const supplied = variables?.['new'];
    if (options.upsertSupplied === true && !isDocument(supplied))
      throw new TesseraError('FAILED_TO_PARSE', 'an update with upsertSupplied needs the document to insert in c.new');
    const seeded =
      options.upsertSupplied === true
        ? (supplied as ValueObject)
        : upsertDocument(query, update, {
            now: this.clock.now(),
            ...(arrayFilters !== undefined ? { arrayFilters } : {}),
            ...(variables !== undefined ? { variables } : {}),
          });
    const { document, size } = prepareInsert(seeded, { generateId: () => this.clock.generateId() }, index);
    const key = encodeKey(extractShardKey(handle.pattern, document));
    if (!handle.owns(key)) {
      throw new TesseraError(
        'STALE_CONFIG',
        `the document an upsert into ${handle.ns} would insert belongs to a chunk this shard does not own`,
        { details: { namespace: handle.ns, index } },
      );
    }
    const id = Buffer.from(encodeKey([document['_id'] as Value]));
    const indexes = await indexesForWrite(manager, handle);
    const entries = entriesOf(indexes, id, document);
    const inserted: unknown[] = await manager.query(
      `INSERT INTO ${handle.table} (id, shard_key, doc, size, valid_from) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING id`,
      [id, Buffer.from(key), JSON.stringify(toExtendedJsonObject(document)), size, writeTimeOf(handle).sql],
    );
    if (inserted.length > 0) handle.onWrite?.(key, size);
    if (inserted.length > 0) handle.transaction?.wrote(handle, id, key);
    if (inserted.length === 0) {
      throw new TesseraError(
        'DUPLICATE_KEY',
        `E11000 duplicate key error collection: ${handle.ns}: the upserted document's _id or unique shard key exists`,
        {
          details: { index },
        },
      );
    }
    await addDocumentEntries(manager, handle.ns, indexes, entries);
    return { document, shardKey: key };
  }

  /** Deletes stored documents and their index entries. */
  private async remove(manager: EntityManager, handle: CollectionHandle, documents: readonly StoredDocument[]): Promise<void> {
    await manager.query(`DELETE FROM ${handle.table} WHERE id = ANY($1::bytea[])`, [documents.map((d) => d.id)]);
    for (const d of documents) handle.transaction?.wrote(handle, d.id, d.shardKey);
    const indexes = await indexesForWrite(manager, handle);
    if (indexes.length > 0)
      await removeEntries(
        manager,
        indexes,
        documents.map((d) => entriesOf(indexes, d.id, d.document)),
      );
  }
}

/** The image a findAndModify returns: the document before it changed, or after when `new`. */
function imageKindOf(request: FindAndModifyRequest): ImageKind {
  return request.new ? 'postImage' : 'preImage';
}

/**
 * The document a retried findAndModify returns, from the session's image. A retry must ask for
 * the image the first attempt recorded; a recorded image that is gone cannot be answered.
 */
function retriedImage(
  recorded: Extract<StatementResult, { op: 'findAndModify' }>,
  history: StatementHistory,
  request: FindAndModifyRequest,
): ValueObject | undefined {
  if (recorded.image === undefined) return undefined;
  if (recorded.image !== imageKindOf(request)) {
    throw new TesseraError(
      'INVALID_OPTIONS',
      `this findAndModify retry asks for the ${imageKindOf(request)} but the first attempt recorded the ${recorded.image}: a retry must send the same new option`,
    );
  }
  const image = history.image();
  if (image === undefined || image.kind !== recorded.image) {
    throw new TesseraError('INCOMPLETE_TRANSACTION_HISTORY', 'the image of this retried findAndModify is no longer recorded');
  }
  return fromExtendedJsonObject(image.document) as ValueObject;
}

/**
 * Records a statement's failure. Even a routing error stays a write error of its statement:
 * the statements before it are committed, and failing the whole request would make a retry
 * apply them twice.
 */
function recordWriteError(errors: WriteErrorEntry[], index: number, error: unknown): void {
  const envelope = error instanceof TesseraError ? error.toEnvelope() : new TesseraError('INTERNAL', (error as Error).message).toEnvelope();
  errors.push({ index, error: envelope });
}

/** What `applyUpdate` takes from a statement: its arrayFilters, its query (for `$` paths) and its `let`. */
function updateOptions(statement: UpdateStatement | FindAndModifyRequest, filter: ValueObject): Omit<ApplyUpdateOptions, 'now'> {
  const { arrayFilters, collation, variables } = statement;
  return {
    query: { filter, ...(collation !== undefined ? { collation } : {}) },
    ...(arrayFilters !== undefined ? { arrayFilters } : {}),
    ...(variables !== undefined ? { variables } : {}),
  };
}
