import type { Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import type { RouterSettings } from '../router.settings.js';
import type { ForegroundLoadService } from '../load/foreground-load.service.js';
import { CurrentOps } from './current-ops.service.js';

function opsLogging(slowMs: number): { ops: CurrentOps; logged: Array<Record<string, unknown>>; writes: number[]; started: string[] } {
  const logged: Array<Record<string, unknown>> = [];
  const writes: number[] = [];
  const started: string[] = [];
  const logger = { info: (fields: Record<string, unknown>) => void logged.push(fields) } as unknown as Logger;
  const load = {
    writeStarted: () => void started.push(`start ${started.length - writes.length}`),
    recordWrite: (ms: number) => void writes.push(ms),
  } as unknown as ForegroundLoadService;
  return { ops: new CurrentOps({ TESSERA_SLOW_OP_MS: slowMs } as RouterSettings, logger, load), logged, writes, started };
}

describe('current operations', () => {
  it("hands the duration of writes, failed ones too, to the balancer's foreground load, and not of reads", async () => {
    const { ops, writes, started } = opsLogging(3_600_000);
    await ops.run({ op: 'insert', command: 'insert', ns: 'db.c' }, async () => 1);
    await ops.run({ op: 'query', command: 'find', ns: 'db.c' }, async () => 1);
    await ops.run({ op: 'command', command: 'aggregate', ns: 'db.c' }, async () => 1);
    await ops.run({ op: 'command', command: 'findAndModify', ns: 'db.c' }, async () => 1);
    await expect(ops.run({ op: 'remove', command: 'delete', ns: 'db.c' }, () => Promise.reject(new Error('x')))).rejects.toThrow();
    expect(writes).toHaveLength(3);
    expect(writes.every((ms) => ms >= 0)).toBe(true);
    // Each write is counted running when it starts, before its duration is recorded.
    expect(started).toEqual(['start 0', 'start 0', 'start 0']);
  });

  it('lists an operation while it runs, with its comment and time limit, and not after', async () => {
    const { ops } = opsLogging(3_600_000);
    let release!: () => void;
    const running = ops.run(
      { op: 'query', command: 'find', ns: 'db.c', body: { comment: 'trace-1', maxTimeMS: 60_000, lsid: { id: 'x' } } },
      () => new Promise<void>((resolve) => (release = resolve)),
    );
    expect(ops.list()).toEqual([
      expect.objectContaining({
        op: 'query',
        ns: 'db.c',
        active: true,
        command: { find: 'c', $db: 'db', comment: 'trace-1', maxTimeMS: 60_000 },
        lsid: { id: 'x' },
      }),
    ]);
    release();
    await running;
    expect(ops.list()).toEqual([]);
  });

  it('logs an operation as slow at the threshold, with its comment and its error, and not below it', async () => {
    const slow = opsLogging(0);
    await slow.ops.run({ op: 'update', command: 'update', ns: 'db.c', body: { comment: 'c1' } }, async () => 1);
    await expect(
      slow.ops.run({ op: 'command', command: 'count', ns: 'db.c' }, () =>
        Promise.reject(Object.assign(new Error('x'), { code: 'BAD_VALUE' })),
      ),
    ).rejects.toThrow('x');
    expect(slow.logged).toEqual([
      expect.objectContaining({ ns: 'db.c', command: { update: 'c', $db: 'db', comment: 'c1' }, durationMillis: expect.any(Number) }),
      expect.objectContaining({ command: { count: 'c', $db: 'db' }, error: 'BAD_VALUE' }),
    ]);
    const quiet = opsLogging(3_600_000);
    await quiet.ops.run({ op: 'update', command: 'update', ns: 'db.c' }, async () => 1);
    expect(quiet.logged).toEqual([]);
  });

  it('answers MaxTimeMSExpired when the operation outlives its maxTimeMS', async () => {
    const { ops } = opsLogging(3_600_000);
    await expect(
      ops.run({ op: 'query', command: 'find', ns: 'db.c', body: { maxTimeMS: 1 } }, () => new Promise(() => undefined)),
    ).rejects.toMatchObject({ code: 'MAX_TIME_MS_EXPIRED' });
    expect(ops.list()).toEqual([]);
  });
});
