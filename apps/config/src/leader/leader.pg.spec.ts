import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import type { ConfigSettings } from '../config.settings.js';
import { LeaderService } from './leader.service.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('config');
});
afterAll(async () => db?.drop());

const settings = {
  TESSERA_HOST: '127.0.0.1',
  TESSERA_PORT: 7999,
  TESSERA_LEADER_LEASE_MS: 5_000,
  TESSERA_LEADER_RENEW_INTERVAL_MS: 50,
} as ConfigSettings;

describe('LeaderService', () => {
  it('just elected, waits for its leader-only services instead of answering NOT_LEADER naming itself', async () => {
    const leader = new LeaderService(db.dataSource, settings, pino({ level: 'silent' }));
    let started!: () => void;
    const starting = new Promise<void>((resolve) => (started = resolve));
    leader.register({ name: 'slow to start', startAsLeader: () => starting, stopAsLeader: async () => undefined });
    leader.onApplicationBootstrap();
    try {
      // Elected: the lease row names this process, but its services have not started yet.
      await expect.poll(async () => (await leader.leader())?.holder).toBe(leader.id);
      expect(leader.isLeader).toBe(false);
      const asked = leader.assertLeader().then(
        (term) => ({ term }),
        (error: unknown) => ({ error }),
      );
      started();
      const answer = await asked;
      expect(answer).toEqual({ term: expect.any(Number) });
    } finally {
      await leader.onApplicationShutdown();
    }
  });

  it('off the leader, names the leader; with none elected, names nobody', async () => {
    const follower = new LeaderService(db.dataSource, settings, pino({ level: 'silent' }));
    const error = await follower.assertLeader().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TesseraError);
    expect(error).toMatchObject({ code: 'NOT_LEADER', details: { leader: null } });
    await db.dataSource.query(
      `INSERT INTO leader_lease (holder, holder_url, term, expires_at) VALUES ('other', 'http://127.0.0.1:7998', 7, now() + interval '1 minute')
       ON CONFLICT (singleton) DO UPDATE SET holder = 'other', holder_url = 'http://127.0.0.1:7998', expires_at = now() + interval '1 minute'`,
    );
    expect(await follower.assertLeader().catch((e: unknown) => e)).toMatchObject({
      code: 'NOT_LEADER',
      details: { leader: 'http://127.0.0.1:7998' },
    });
  });
});
