import { TesseraError } from '@tessera/core';
import type { InsertCommand, InsertCommandResult, SessionPart, WriteErrorEntry } from '@tessera/protocol';
import type { ShardVersioning } from '../routing/cluster-routing.service.js';

/** Sends one insert command to a shard. */
export type SendInsert = (shard: string, command: InsertCommand) => Promise<InsertCommandResult>;

export interface InsertCoalescingLimits {
  /** Insert commands under way at once per shard and namespace; more wait and go together. */
  maxInFlight: number;
  /** Documents one combined command may carry. */
  maxDocuments: number;
  /** BSON bytes one combined command may carry (a request above it goes alone). */
  maxBytes: number;
}

/**
 * One in flight per lane: concurrent single inserts to a shard wait for the previous command
 * and then go together, so N clients cost about one round trip and one commit per shard per
 * wave instead of N. One in flight was chosen over two and four on bench:crud (docs/benchmarks.md).
 */
export const DEFAULT_INSERT_COALESCING: InsertCoalescingLimits = { maxInFlight: 1, maxDocuments: 1_000, maxBytes: 8 * 1024 * 1024 };

interface Waiting {
  documents: unknown[];
  ordered: boolean;
  bytes: number;
  /** A retryable insert's session, txnNumber and stmtIds. */
  session: SessionPart | undefined;
  resolve(result: InsertCommandResult): void;
  reject(error: unknown): void;
}

interface Lane {
  shard: string;
  ns: string;
  versioning: ShardVersioning;
  inFlight: number;
  queue: Waiting[];
}

/**
 * Group commit for inserts on the router: child batches bound for the same shard, namespace and
 * shard version while another insert there is under way are sent as one unordered command, and
 * the shard's answer is split back by position. Each request keeps its own results: which of
 * its documents were inserted and its write errors, by its own indexes, and a failure of the whole command
 * (`STALE_CONFIG`, the shard unreachable) is each request's failure, handled by its own retry.
 *
 * Only what an unordered command may run in any order is combined: unordered child batches and
 * ordered ones of one document (an ordered batch of several stops at its first error, so it
 * goes alone). Two requests' documents with one `_id` meet the same fate as run one after the
 * other: the first is inserted, the second gets a duplicate key error.
 *
 * Retryable inserts are combined among themselves (their own lanes), each request's documents
 * a session part of the command (`sessionParts`), one part per session: a session's second
 * request waits for the next command, as the shard would run one operation of a session at a
 * time anyway. A part refused with TRANSACTION_TOO_OLD fails its own request; the command ran
 * nothing, so the other requests go again.
 */
export class InsertCoalescer {
  private readonly lanes = new Map<string, Lane>();

  constructor(
    private readonly send: SendInsert,
    private readonly limits: InsertCoalescingLimits = DEFAULT_INSERT_COALESCING,
  ) {}

  /** Inserts `documents` (wire form) on `shard`; `bytes` is their BSON size. */
  insert(
    shard: string,
    ns: string,
    versioning: ShardVersioning,
    documents: unknown[],
    ordered: boolean,
    bytes: number,
    session?: SessionPart,
  ): Promise<InsertCommandResult> {
    const alone = (ordered && documents.length > 1) || documents.length >= this.limits.maxDocuments || bytes >= this.limits.maxBytes;
    if (alone) return this.send(shard, { ns, ...versioning, ...session, ordered, documents });
    const key = `${shard}\u0000${ns}\u0000${versionKey(versioning)}\u0000${session === undefined ? '' : 'retryable'}`;
    let lane = this.lanes.get(key);
    if (lane === undefined) this.lanes.set(key, (lane = { shard, ns, versioning, inFlight: 0, queue: [] }));
    const target = lane;
    return new Promise<InsertCommandResult>((resolve, reject) => {
      target.queue.push({ documents, ordered, bytes, session, resolve, reject });
      this.drain(key, target);
    });
  }

  private drain(key: string, lane: Lane): void {
    while (lane.inFlight < this.limits.maxInFlight && lane.queue.length > 0) {
      const group = this.takeGroup(lane);
      lane.inFlight++;
      const alone = group.length === 1 ? group[0]! : undefined;
      const documents = alone?.documents ?? group.flatMap((w) => w.documents);
      const sessions = alone !== undefined ? alone.session : group[0]!.session && { sessionParts: group.map((w) => w.session!) };
      this.send(lane.shard, { ns: lane.ns, ...lane.versioning, ...sessions, ordered: alone?.ordered ?? false, documents })
        .then(
          (reply) => distribute(group, reply),
          (error: unknown) => {
            const refused = refusedPart(error, group);
            if (refused === undefined) for (const waiting of group) waiting.reject(error);
            else lane.queue.unshift(...group.filter((w) => w !== refused));
          },
        )
        .finally(() => {
          lane.inFlight--;
          if (lane.inFlight === 0 && lane.queue.length === 0) this.lanes.delete(key);
          else this.drain(key, lane);
        });
    }
  }

  /** The longest prefix of the queue within the limits (at least one request). */
  private takeGroup(lane: Lane): Waiting[] {
    let documents = 0;
    let bytes = 0;
    let count = 0;
    const sessions = new Set<string>();
    for (const waiting of lane.queue) {
      if (count > 0 && (documents + waiting.documents.length > this.limits.maxDocuments || bytes + waiting.bytes > this.limits.maxBytes))
        break;
      if (waiting.session !== undefined) {
        if (sessions.has(waiting.session.lsid.id)) break;
        sessions.add(waiting.session.lsid.id);
      }
      documents += waiting.documents.length;
      bytes += waiting.bytes;
      count++;
    }
    return lane.queue.splice(0, count);
  }
}

/** Gives each request of a combined command its part of the answer, by its own indexes. */
function distribute(group: readonly Waiting[], reply: InsertCommandResult): void {
  if (group.length === 1) {
    group[0]!.resolve(reply);
    return;
  }
  let offset = 0;
  for (const [part, waiting] of group.entries()) {
    const from = offset;
    const to = from + waiting.documents.length;
    offset = to;
    const inserted = reply.inserted.filter((index) => index >= from && index < to).map((index) => index - from);
    const writeErrors = reply.writeErrors.filter((e) => e.index >= from && e.index < to).map((e) => rebaseError(e, from));
    const retried = reply.retriedByPart?.[part] ?? [];
    waiting.resolve({ insertedCount: inserted.length, inserted, writeErrors, ...(retried.length > 0 ? { retriedStmtIds: retried } : {}) });
  }
}

/**
 * The request of `group` whose session part the shard refused with TRANSACTION_TOO_OLD, which
 * is rejected here with the error (without the part's number, which is the command's, not the
 * request's); undefined for any other failure.
 */
function refusedPart(error: unknown, group: readonly Waiting[]): Waiting | undefined {
  if (group.length === 1 || !(error instanceof TesseraError) || error.code !== 'TRANSACTION_TOO_OLD') return undefined;
  const { part, ...details } = error.details ?? {};
  const refused = typeof part === 'number' ? group[part] : undefined;
  refused?.reject(new TesseraError(error.code, error.message, { details }));
  return refused;
}

function rebaseError(entry: WriteErrorEntry, offset: number): WriteErrorEntry {
  const index = entry.index - offset;
  const details = entry.error.details;
  if (details === undefined || typeof details['index'] !== 'number') return { index, error: entry.error };
  return { index, error: { ...entry.error, details: { ...details, index } } };
}

function versionKey(versioning: ShardVersioning): string {
  const { shardVersion: v, databaseVersion: d } = versioning;
  return `${v.epoch}|${v.timestamp}|${v.major}|${v.minor}|${d === undefined ? '' : `${d.uuid}|${d.lastMod}`}`;
}
