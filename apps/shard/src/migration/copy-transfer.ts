import { pipeline } from 'node:stream/promises';
import { Readable, Writable } from 'node:stream';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import type { DataSource, QueryRunner } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { databaseErrorCode } from '@tessera/platform';
import { transferLines } from '@tessera/protocol';

/**
 * Cloning moves rows in Postgres' own COPY text format: the donor's `COPY (SELECT ...) TO
 * STDOUT` is the response body, and the recipient feeds it to `COPY ... FROM STDIN` unchanged,
 * so no document is parsed or re-serialized on the way (the bulk path MongoDB's cloner takes
 * with BSON). Each line is `id, shard_key, doc, size`, tab-separated, bytea as `\\x<hex>`.
 */

const COLUMNS = 'id, shard_key, doc, size';

const bytea = (b: Buffer) => `'\\x${b.toString('hex')}'::bytea`;

/** The rows of `table` in [min, max) after (key, id), in (shard key, _id) order, at most `limit`, as COPY text. */
export async function copyRangeOut(
  dataSource: DataSource,
  table: string,
  range: { min: Buffer; max: Buffer },
  after: { key: Buffer; id: Buffer } | undefined,
  limit: number,
): Promise<string> {
  const resume =
    after === undefined ? '' : `AND shard_key >= ${bytea(after.key)} AND (shard_key, id) > (${bytea(after.key)}, ${bytea(after.id)})`;
  const sql = `COPY (SELECT ${COLUMNS} FROM ${table} WHERE shard_key >= ${bytea(range.min)} AND shard_key < ${bytea(range.max)} ${resume}
    ORDER BY shard_key, id LIMIT ${Math.trunc(limit)}) TO STDOUT`;
  return copyOut(dataSource, sql);
}

/** The rows of `table` after the encoded `_id` `afterId`, in `_id` order, at most `limit`, as COPY text (a whole collection's clone). */
export function copyTableOut(dataSource: DataSource, table: string, afterId: Buffer | undefined, limit: number): Promise<string> {
  const resume = afterId === undefined ? '' : `WHERE id > ${bytea(afterId)}`;
  return copyOut(dataSource, `COPY (SELECT ${COLUMNS} FROM ${table} ${resume} ORDER BY id LIMIT ${Math.trunc(limit)}) TO STDOUT`);
}

async function copyOut(dataSource: DataSource, sql: string): Promise<string> {
  const runner = dataSource.createQueryRunner();
  try {
    const client = (await runner.connect()) as { query(stream: unknown): Readable };
    const chunks: Buffer[] = [];
    await pipeline(
      client.query(copyTo(sql)),
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          chunks.push(chunk);
          done();
        },
      }),
    );
    return Buffer.concat(chunks).toString('utf8');
  } finally {
    await runner.release();
  }
}

/** Writes COPY text rows into `table` on the runner's connection (inside its transaction). Throws `DUPLICATE_KEY` on an `_id` already stored. */
export async function copyRowsIn(runner: QueryRunner, table: string, text: string, ns: string): Promise<void> {
  const client = (await runner.connect()) as { query(stream: unknown): Writable };
  try {
    await pipeline(Readable.from([Buffer.from(text, 'utf8')]), client.query(copyFrom(`COPY ${table} (${COLUMNS}) FROM STDIN`)));
  } catch (error) {
    if (databaseErrorCode(error) === '23505') {
      throw new TesseraError(
        'DUPLICATE_KEY',
        `a document of the incoming range of ${ns} has an _id that this shard already holds in another range`,
        {
          details: { ns },
        },
      );
    }
    throw error;
  }
}

/** One row of COPY text: the encoded `_id` and shard key (hex), the stored size, and the document's JSON text. */
export interface CopiedRow {
  id: string;
  key: string;
  size: number;
  /** Unescaped on first use: only secondary indexes need the document. */
  readonly doc: string;
}

/** Splits COPY text into rows, undoing COPY's backslash escapes in the document column. */
export function parseCopyRows(text: string): CopiedRow[] {
  const rows: CopiedRow[] = [];
  for (const line of transferLines(text)) {
    const [id, key, doc, size] = line.split('\t');
    if (id === undefined || key === undefined || doc === undefined || size === undefined)
      throw new Error(`malformed COPY row: ${line.slice(0, 80)}`);
    rows.push({
      id: byteaHex(id),
      key: byteaHex(key),
      size: Number(size),
      get doc() {
        return unescapeCopyText(doc);
      },
    });
  }
  return rows;
}

/** `\\x0a1b` (bytea in COPY text) → `0a1b`. */
function byteaHex(field: string): string {
  if (!field.startsWith('\\\\x')) throw new Error(`expected a hex bytea in COPY text, got ${field.slice(0, 20)}`);
  return field.slice(3);
}

const ESCAPES: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\' };

/** Undoes COPY text escaping (backslash sequences) of one field. */
export function unescapeCopyText(field: string): string {
  if (!field.includes('\\')) return field;
  return field.replace(/\\(.)/g, (_, c: string) => ESCAPES[c] ?? c);
}
