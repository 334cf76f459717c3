import pino from 'pino';
import { firstValueFrom, take, toArray } from 'rxjs';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterEvent } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { EventBus, changelogRows } from './event-bus.js';

let db: TestDatabase;
let changelog: ChangelogService;
const buses: EventBus[] = [];
const silent = pino({ level: 'silent' });

beforeAll(async () => {
  db = await createTestDatabase('config');
  changelog = new ChangelogService({ TESSERA_NODE_NAME: 'test' } as never);
});
afterAll(async () => {
  await Promise.all(buses.map((b) => b.stop()));
  await db?.drop();
});

async function startBus(dataSource: DataSource = db.dataSource): Promise<EventBus> {
  const bus = new EventBus(
    db.url,
    changelogRows((sql, p) => dataSource.query(sql, p)),
    silent,
  );
  await bus.start();
  buses.push(bus);
  return bus;
}

async function record(what: string, details: Record<string, unknown> = {}): Promise<void> {
  await db.dataSource.transaction((manager) => changelog.record(manager, { what, ns: 'd.c', details }));
}

const collect = (bus: EventBus, n: number, since?: number) => firstValueFrom(bus.stream(() => true, since).pipe(take(n), toArray()));
const kinds = (events: ClusterEvent[]) => events.map((e) => e.kind);

describe('the event bus', () => {
  it('numbers events in commit order, not insert order', async () => {
    const bus = await startBus();
    const seen = collect(bus, 2);
    // The first transaction inserts first but commits last.
    const runner = db.dataSource.createQueryRunner();
    await runner.startTransaction();
    await changelog.record(runner.manager, { what: 'first.inserted', ns: 'd.c' });
    await record('second.inserted');
    await runner.commitTransaction();
    await runner.release();
    const events = await seen;
    expect(kinds(events)).toEqual(['second.inserted', 'first.inserted']);
    expect(events[1]!.seq).toBe(events[0]!.seq + 1);
    const rows: Array<{ what: string }> = await db.dataSource.query('SELECT what FROM changelog ORDER BY seq DESC LIMIT 2');
    expect(rows.map((r) => r.what)).toEqual(['first.inserted', 'second.inserted']);
  });

  it('gives a rolled-back change neither a row nor an event', async () => {
    const bus = await startBus();
    const seen = collect(bus, 1);
    await db.dataSource
      .transaction(async (manager) => {
        await changelog.record(manager, { what: 'rolledBack' });
        throw new Error('abort');
      })
      .catch(() => undefined);
    await record('committed');
    expect(kinds(await seen)).toEqual(['committed']);
  });

  it('delivers to a second process, and fetches a payload too big for NOTIFY by id', async () => {
    const other = await startBus(await db.connect());
    const seen = collect(other, 2);
    const big = 'x'.repeat(20_000);
    await record('big', { big });
    await record('small');
    const events = await seen;
    expect(kinds(events)).toEqual(['big', 'small']);
    expect(events[0]!.details.big).toBe(big);
  });

  it('resumes after a sequence number with nothing missed and nothing twice, from the database and then live', async () => {
    const before = (await startBus()).lastSeq;
    for (let i = 0; i < 5; i++) await record(`resume.${i}`);
    // A new process has none of them in memory: the first five come from the table, the rest live.
    const fresh = await startBus(await db.connect());
    const seen = collect(fresh, 8, before);
    for (let i = 5; i < 8; i++) await record(`resume.${i}`);
    const events = await seen;
    expect(kinds(events)).toEqual(Array.from({ length: 8 }, (_, i) => `resume.${i}`));
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 8 }, (_, i) => before + 1 + i));
  });

  it('catches up on what committed while its listening connection was down', async () => {
    const bus = await startBus();
    const seen = collect(bus, 3);
    await db.dataSource.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tessera-events'");
    for (let i = 0; i < 3; i++) await record(`outage.${i}`);
    expect(kinds(await seen)).toEqual(['outage.0', 'outage.1', 'outage.2']);
  });

  it('tags each event with its topics', async () => {
    const bus = await startBus();
    const seen = collect(bus, 1);
    await record('moveChunk.commit');
    expect((await seen)[0]).toMatchObject({ kind: 'moveChunk.commit', topics: ['placement', 'migrations'], ns: 'd.c', server: 'test' });
  });
});
