import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { shardMigrations } from '@tessera/migrations';
import { runMigrations } from '@tessera/platform';
import { CollectionStorageService, tableName } from '../apps/shard/src/collections/collection-storage.service.js';
import { ChunkSizingService } from '../apps/shard/src/chunks/chunk-sizing.service.js';
import { startEmbeddedPostgres } from '../tools/cluster/postgres.js';

/**
 * bench:size-tracking — what the size triggers cost the writes (collection_sizes, issue 29: the
 * balancer's statsForBalancing reads the totals they keep instead of every table). One embedded
 * Postgres with durable settings holds two collection tables made by the shard's own
 * `createCollection`; one then loses its size triggers. The same loads go to each in turns,
 * slice after slice, from 16 connections: single-row inserts, inserts of 100 rows, and single
 * updates that change a document's size (each keeps the version it replaces, as with history
 * on). Prints each load's rows per second with the triggers against without, then what a
 * statsForBalancing costs (folding the changes the loads left, and with none) against summing the
 * table as it did before.
 */
const SLICES = Number(process.env.BENCH_SLICES ?? 4);
const SLICE_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = 16;
const DOC = JSON.stringify({ pad: 'p'.repeat(160) });

type Load = 'single inserts' | 'batches of 100' | 'single updates';
const LOADS: Load[] = ['single inserts', 'batches of 100', 'single updates'];

const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-sizes-'));
chmodSync(dir, 0o755);
const server = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), port: Number(process.env.BENCH_PG_PORT ?? 55_490) });
try {
  await server.ensureDatabase('sizes');
  const url = server.urlFor('sizes');
  await runMigrations(url, shardMigrations);
  const dataSource = await new DataSource({ type: 'postgres', url, logging: false }).initialize();
  const storage = new CollectionStorageService(dataSource);
  const tables = { on: '', off: '' };
  for (const side of ['on', 'off'] as const) {
    const uuid = randomUUID();
    await storage.createCollection(uuid, { ns: `bench.${side}`, keyPattern: { k: 1 } });
    tables[side] = tableName(uuid);
  }
  for (const trigger of ['size_insert_trigger', 'size_update_trigger', 'size_delete_trigger'])
    await dataSource.query(`DROP TRIGGER ${trigger} ON ${tables.off}`);
  const pool = new pg.Pool({
    connectionString: url,
    max: CONCURRENCY,
    options: '-c tessera.keep_history=on -c tessera.write_time=1',
  });
  const next = { on: 0, off: 0 };
  const rows: Record<Load, { on: number; off: number; seconds: { on: number; off: number } }> = Object.fromEntries(
    LOADS.map((l) => [l, { on: 0, off: 0, seconds: { on: 0, off: 0 } }]),
  ) as never;

  /** Runs `load` on one side for `seconds`; answers the rows written. */
  const run = async (load: Load, side: 'on' | 'off', seconds: number): Promise<number> => {
    const table = tables[side];
    const until = Date.now() + seconds * 1000;
    let written = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (Date.now() < until) {
          if (load === 'single updates') {
            const key = Math.floor(Math.random() * Math.max(1, next[side]));
            await pool.query(`UPDATE ${table} SET doc = $2, size = $3 WHERE id = int4send($1)`, [key, DOC, 150 + (written % 50)]);
            written++;
            continue;
          }
          const n = load === 'batches of 100' ? 100 : 1;
          const first = next[side];
          next[side] += n;
          await pool.query(
            `INSERT INTO ${table} (id, shard_key, doc, size, valid_from)
             SELECT int4send(i), int4send(i), $3::json, 200, 1 FROM generate_series($1::int, $2::int) i`,
            [first, first + n - 1, DOC],
          );
          written += n;
        }
      }),
    );
    return written;
  };

  console.log(`bench:size-tracking — ${SLICES} slices of ${SLICE_SECONDS} s per load and side, ${CONCURRENCY} connections`);
  for (const load of LOADS) {
    await run(load, 'on', 1);
    await run(load, 'off', 1);
    for (let slice = 0; slice < SLICES; slice++) {
      const order: Array<'on' | 'off'> = slice % 2 === 0 ? ['on', 'off'] : ['off', 'on'];
      for (const side of order) {
        rows[load][side] += await run(load, side, SLICE_SECONDS);
        rows[load].seconds[side] += SLICE_SECONDS;
      }
    }
  }
  for (const load of LOADS) {
    const on = rows[load].on / rows[load].seconds.on;
    const off = rows[load].off / rows[load].seconds.off;
    console.log(`${load.padEnd(16)} with triggers ${Math.round(on)}/s, without ${Math.round(off)}/s: ${(on / off).toFixed(3)}×`);
  }
  const sizing = new ChunkSizingService(dataSource, storage);
  const timed = async <T>(work: () => Promise<T>): Promise<{ ms: number; value: T }> => {
    const started = performance.now();
    const value = await work();
    return { ms: performance.now() - started, value };
  };
  const [{ changes }] = (await dataSource.query('SELECT count(*) AS changes FROM collection_size_changes')) as [{ changes: string }];
  const folding = await timed(() => sizing.statsForBalancing({ namespaces: ['bench.on'] }));
  const again = await timed(() => sizing.statsForBalancing({ namespaces: ['bench.on'] }));
  const summed = await timed(() => sizing.dataSize({ ns: 'bench.on' }));
  const kept = folding.value.stats[0]!.collSize;
  console.log(
    `statsForBalancing: ${folding.ms.toFixed(1)} ms folding ${changes} changes, ${again.ms.toFixed(1)} ms with none;` +
      ` summing the table (${summed.value.numObjects} documents): ${summed.ms.toFixed(1)} ms;` +
      ` kept ${kept} bytes, summed ${summed.value.size}${kept === summed.value.size ? '' : ' — DIFFERENT'}`,
  );
  await pool.end();
  await dataSource.destroy();
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
