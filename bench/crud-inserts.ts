import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import pg from 'pg';
import { encodeKey, extractShardKey, parseShardKeyPattern, toExtendedJsonObject } from '@tessera/core';
import { type CrudFixture, type RouterAccess, postJson } from './crud-fixture.js';
import type { CrudReport } from './crud-report.js';
import { type CrudSettings, SHARD_KEY, documentFor } from './crud-settings.js';
import type { ProcessCpu } from './process-cpu.js';
import { isSteady } from './steady-state.js';

/** The goal for authorization: at most 5% slower with it on. */
const AUTHORIZATION_GOAL = 0.95;

/** Writes the `count` documents of keys from `first` on, one request or statement. */
type Insert = (first: number, count: number) => Promise<void>;

/** One way of a comparison in turns: its inserts, and what to set up before each of its slices. */
interface Turn {
  readonly insert: Insert;
  readonly before?: () => Promise<void>;
}

/** Insert throughput of the three ways, for batches of 1 and of 100 documents; each way's run is measured from a checkpoint. */
export async function runInserts(fixture: CrudFixture, settings: CrudSettings, report: CrudReport): Promise<void> {
  for (const batch of [1, 100]) {
    await fixture.config.shardCollection({ ns: `bench.docs${batch}`, key: SHARD_KEY });
    // The retryable run gets a collection of its own, so it starts from an empty table as the
    // plain run does, not from the table that run grew (docs/benchmarks.md).
    await fixture.config.shardCollection({ ns: `bench.retryable${batch}`, key: SHARD_KEY });
    /**
     * Measures `insert` from `concurrency` loops after the warm-up, with the CPU `meter` saw
     * meanwhile. Each run is measured from a checkpoint, so every run starts with its pages clean.
     */
    const insertRun = (what: string, insert: Insert, meter: ProcessCpu = fixture.cpu) => {
      const label = `insert ${what}, batches of ${batch}`;
      return measured(
        fixture,
        report,
        label,
        'document',
        (begin) => throughput(settings, report, label, batch, insert, begin),
        (r) => r.documents,
        meter,
      );
    };
    const plainInsert = insertViaRouter(fixture, batch);
    const retryableInsert = insertRetryableViaRouter(fixture, batch);
    const viaRouter = await insertRun('via router', plainInsert);
    const retryable = await insertRun('retryable via router', retryableInsert);
    report.retryable.push({
      what: `insert, batches of ${batch}`,
      sequential: { plain: viaRouter.rate, retryable: retryable.rate },
      slices: (await inTurns(settings, batch, { insert: plainInsert }, { insert: retryableInsert })).map(([plain, r]) => ({
        plain,
        retryable: r,
      })),
    });
    // The shards' size triggers (collection_sizes) on and off beneath the same plain inserts.
    const ns = `bench.docs${batch}`;
    const sizeSlices = await inTurns(
      settings,
      batch,
      { insert: plainInsert, before: () => setSizeTriggers(fixture, ns, true) },
      { insert: plainInsert, before: () => setSizeTriggers(fixture, ns, false) },
    );
    await setSizeTriggers(fixture, ns, true);
    report.onOff.push({
      what: `insert, batches of ${batch}`,
      feature: 'size triggers',
      slices: sizeSlices.map(([on, off]) => ({ on, off })),
    });
    // The same plain inserts through a router that checks the caller's API key and roles on every
    // request (TESSERA_AUTHORIZATION=enabled) and through its twin that does not, side by side:
    // each slice runs both at once, so both meet the machine's same moments.
    const authInsert = insertViaRouter(fixture, batch, fixture.authorizingRouter);
    const twinInsert = insertViaRouter(fixture, batch, fixture.twinRouter);
    const authSlices = await sideBySide(settings, batch, authInsert, twinInsert);
    report.onOff.push({
      what: `insert, batches of ${batch}`,
      feature: 'authorization',
      taken: 'side by side',
      slices: authSlices.map(([on, off]) => ({ on, off })),
      goal: AUTHORIZATION_GOAL,
    });
    const table = `raw${batch}`;
    await fixture.raw.query(
      `CREATE TABLE ${table} (id bytea PRIMARY KEY, shard_key bytea NOT NULL, doc json NOT NULL, size integer NOT NULL, valid_from int8 NOT NULL)`,
    );
    await fixture.raw.query(`CREATE INDEX ON ${table} (shard_key)`);
    const rawRate = await insertRun('raw pg', insertRaw(fixture.raw, table));
    const floor = await insertRun('via floor', insertViaFloor(fixture, batch), fixture.floorCpu);
    report.inserts.push({
      what: `insert, batches of ${batch}`,
      router: viaRouter.rate,
      floor: floor.rate,
      raw: rawRate.rate,
      goal: batch === 1 ? 0.3 : 0.5,
    });
  }
}

/** Inserts into `bench.docs<batch>` through the router. */
function insertViaRouter(fixture: CrudFixture, batch: number, via: RouterAccess = { url: fixture.router }): Insert {
  return async (first, count) => {
    const documents = Array.from({ length: count }, (_, i) => documentFor(first + i));
    const body = { documents, ordered: false };
    const answer = await postJson<{ insertedCount?: number }>(
      fixture.host.agent,
      `${via.url}/v1/bench/docs${batch}/insert`,
      body,
      via.authorization,
    );
    if (answer.insertedCount !== count) throw new Error(`router insert failed: ${JSON.stringify(answer).slice(0, 300)}`);
  };
}

/**
 * Inserts into `bench.retryable<batch>` through the router as retryable writes, as drivers send them:
 * each client loop holds a session and sends each command with the session's next txnNumber.
 */
function insertRetryableViaRouter(fixture: CrudFixture, batch: number): Insert {
  const idle: Array<{ id: string; txnNumber: number }> = [];
  return async (first, count) => {
    const session = idle.pop() ?? { id: randomUUID(), txnNumber: 0 };
    session.txnNumber += 1;
    try {
      const documents = Array.from({ length: count }, (_, i) => documentFor(first + i));
      const answer = await postJson<{ insertedCount?: number }>(fixture.host.agent, `${fixture.router}/v1/bench/retryable${batch}/insert`, {
        documents,
        ordered: false,
        lsid: { id: { $uuid: session.id } },
        txnNumber: session.txnNumber,
      });
      if (answer.insertedCount !== count) throw new Error(`retryable insert failed: ${JSON.stringify(answer).slice(0, 300)}`);
    } finally {
      idle.push(session);
    }
  };
}

/** Inserts the router's rows into `table` of the raw baseline's database, with the shard's statement. */
function insertRaw(raw: pg.Pool, table: string): Insert {
  // The collections' own key: a hashed key spreads the index inserts over the whole btree, which
  // costs Postgres more per row than a ranged key's appends at its right edge, so a ranged key
  // would not be the same rows.
  const pattern = parseShardKeyPattern(SHARD_KEY);
  return async (first, count) => {
    const rows = Array.from({ length: count }, (_, i) => {
      // As the router does for a document without one: an ObjectId `_id`, first.
      const document = { _id: new ObjectId(), ...documentFor(first + i) };
      const text = JSON.stringify(toExtendedJsonObject(document));
      return [Buffer.from(encodeKey([document._id])), Buffer.from(encodeKey(extractShardKey(pattern, document))), text, text.length];
    });
    // The shard's statement: the documents as one JSON array, cut into rows by Postgres.
    await raw.query(
      `INSERT INTO ${table} (id, shard_key, doc, size, valid_from)
         SELECT *, $5::int8 FROM ROWS FROM (unnest($1::bytea[]), unnest($2::bytea[]), json_array_elements($3::json), unnest($4::int[]))`,
      [
        rows.map((row) => row[0]),
        rows.map((row) => row[1]),
        `[${rows.map((row) => row[2]).join(',')}]`,
        rows.map((row) => row[3]),
        Date.now(),
      ],
    );
  };
}

/** Inserts through the floor's relay. */
function insertViaFloor(fixture: CrudFixture, batch: number): Insert {
  // Its keys start past the other run's, so the two runs' rows never share an id.
  const keyBase = batch === 1 ? 1_000_000_000 : 0;
  return async (first, count) => {
    const documents = Array.from({ length: count }, (_, i) => documentFor(keyBase + first + i));
    const answer = await postJson<{ insertedCount?: number }>(fixture.host.agent, `${fixture.relay.url}/insert`, { documents });
    if (answer.insertedCount !== count) throw new Error(`floor insert failed: ${JSON.stringify(answer).slice(0, 300)}`);
  };
}

/**
 * Runs `work` and records the CPU each process group spent on it per unit of `count`, and the
 * background work that ran meanwhile, from the moment `work`'s call of `begin` resolves:
 * `begin` first has Postgres take a checkpoint (see BackgroundWork).
 */
async function measured<T>(
  fixture: CrudFixture,
  report: CrudReport,
  what: string,
  per: string,
  work: (begin: () => Promise<void>) => Promise<T>,
  count: (result: T) => number,
  meter: ProcessCpu,
): Promise<T> {
  const { background } = fixture;
  let before = meter.snapshot();
  let backgroundBefore = await background.snapshot();
  const result = await work(async () => {
    await background.checkpoint();
    before = meter.snapshot();
    backgroundBefore = await background.snapshot();
  });
  const spent = meter.since(before);
  report.cpuRows.push({ what, per, spent, count: count(result), meanwhile: await background.since(backgroundBefore) });
  return result;
}

/**
 * Runs `insert` from `concurrency` loops in windows of `windowSeconds` until the rate is steady
 * and `insertWarmupMinSeconds` have passed (or `warmupMaxSeconds`), then awaits `begin` (the
 * load goes on meanwhile) and measures for `seconds`: answers the documents written per second,
 * and how many, from the inserts that completed after `begin`.
 */
async function throughput(
  settings: CrudSettings,
  report: CrudReport,
  what: string,
  batch: number,
  insert: Insert,
  begin: () => Promise<void>,
): Promise<{ rate: number; documents: number }> {
  let next = 0;
  let completed = 0;
  let measuredFrom: number | undefined;
  let stopAt = Infinity;
  const started = performance.now();
  const rates: number[] = [];
  const loops = Promise.all(
    Array.from({ length: settings.concurrency }, async () => {
      while (performance.now() < stopAt) {
        const first = next;
        next += batch;
        await insert(first, batch);
        completed += batch;
      }
    }),
  );
  while (measuredFrom === undefined) {
    const windowStart = performance.now();
    const before = completed;
    await new Promise((resolve) => setTimeout(resolve, settings.windowSeconds * 1000));
    rates.push((completed - before) / ((performance.now() - windowStart) / 1000));
    const elapsed = performance.now() - started;
    if ((isSteady(rates) && elapsed >= settings.insertWarmupMinSeconds * 1000) || elapsed >= settings.warmupMaxSeconds * 1000) {
      report.recordWarmup(
        what,
        elapsed / 1000,
        rates,
        rates.map((r) => r.toFixed(0)),
      );
      await begin();
      completed = 0;
      measuredFrom = performance.now();
      stopAt = measuredFrom + settings.seconds * 1000;
    }
  }
  await loops;
  return { rate: completed / ((performance.now() - measuredFrom) / 1000), documents: completed };
}

/** Slices each way of a comparison in turns gets. */
const TURN_SLICES = 8;

/**
 * Two ways of inserting through the router, both warm, in alternating slices of `windowSeconds`
 * (as the point reads are measured), so that each gets the same share of the machine's phases:
 * one run after the other, their ratio swung with whatever the machine did meanwhile
 * (docs/benchmarks.md). Answers each slice's documents per second of each way, `a`'s first.
 */
async function inTurns(settings: CrudSettings, batch: number, a: Turn, b: Turn): Promise<Array<[number, number]>> {
  let next = 0;
  const slice = async ({ insert, before }: Turn) => {
    await before?.();
    const stopAt = performance.now() + settings.windowSeconds * 1000;
    const started = performance.now();
    let completed = 0;
    await Promise.all(
      Array.from({ length: settings.concurrency }, async () => {
        while (performance.now() < stopAt) {
          const first = next;
          next += batch;
          await insert(first, batch);
          completed += batch;
        }
      }),
    );
    return completed / ((performance.now() - started) / 1000);
  };
  const slices: Array<[number, number]> = [];
  for (let i = 0; i < TURN_SLICES; i++) {
    // ABBA: neither way always goes first.
    if (i % 2 === 0) slices.push([await slice(a), await slice(b)]);
    else {
      const second = await slice(b);
      slices.push([await slice(a), second]);
    }
  }
  return slices;
}

/**
 * Two ways through twin processes, at once: in each of TURN_SLICES slices of `windowSeconds`,
 * half the loops insert one way and half the other, so that both meet the same moments of the
 * machine (whose speed drifts from minute to minute by more than the difference measured).
 * The two ways' loops are started alternately. One uncounted slice warms both up.
 */
async function sideBySide(settings: CrudSettings, batch: number, a: Insert, b: Insert): Promise<Array<[number, number]>> {
  let next = 0;
  const slice = async (): Promise<[number, number]> => {
    const stopAt = performance.now() + settings.windowSeconds * 1000;
    const started = performance.now();
    const completed = [0, 0];
    const loop = async (side: 0 | 1) => {
      const insert = side === 0 ? a : b;
      while (performance.now() < stopAt) {
        const first = next;
        next += batch;
        await insert(first, batch);
        completed[side]! += batch;
      }
    };
    const half = Math.max(1, Math.floor(settings.concurrency / 2));
    await Promise.all(Array.from({ length: half * 2 }, (_, i) => loop((i % 2) as 0 | 1)));
    const seconds = (performance.now() - started) / 1000;
    return [completed[0]! / seconds, completed[1]! / seconds];
  };
  await slice();
  const slices: Array<[number, number]> = [];
  for (let i = 0; i < TURN_SLICES; i++) slices.push(await slice());
  return slices;
}

/**
 * Turns the size triggers' insert trigger on or off on `ns`'s table in every shard's database.
 * ALTER TABLE locks the table against writes, so it runs between two slices, with none in flight.
 */
async function setSizeTriggers(fixture: CrudFixture, ns: string, on: boolean): Promise<void> {
  for (const url of fixture.shardUrls) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const found = await client.query<{ table_name: string }>('SELECT table_name FROM collections WHERE ns = $1', [ns]);
      for (const { table_name } of found.rows)
        await client.query(`ALTER TABLE ${table_name} ${on ? 'ENABLE' : 'DISABLE'} TRIGGER size_insert_trigger`);
    } finally {
      await client.end();
    }
  }
}
