import { describe, expect, it } from 'vitest';
import type { EntityManager } from 'typeorm';
import { type ExecutedStatement, type StatementHistory, type StatementResult, inPhase } from './statement-history.js';

/** A history holding `ran` for statement 0, keeping what is recorded. */
function historyOf(ran: StatementResult | undefined): StatementHistory & { records: ExecutedStatement[][] } {
  const records: ExecutedStatement[][] = [];
  return {
    records,
    executed: () => ran,
    ran: () => ran,
    image: () => undefined,
    record: async (_manager, statements) => void records.push([...statements]),
    recording: () => ({ shape: '', ctes: '', check: '', values: [] }),
    recorded: (statements) => void records.push([...statements]),
  };
}

const manager = {} as EntityManager;
const none = () => 'none';

describe('a write without shard key, in phases on a shard', () => {
  it('probe: runs nothing for a statement this shard did not run, answers one it did from history', async () => {
    let runs = 0;
    const work = async (history: StatementHistory | undefined) => {
      runs++;
      return history?.executed(0) === undefined ? 'ran' : 'from history';
    };
    expect(await inPhase('probe', none, work)(historyOf(undefined))).toBe('none');
    expect(await inPhase('probe', none, work)(undefined)).toBe('none');
    expect(runs).toBe(0);
    expect(await inPhase('probe', none, work)(historyOf({ op: 'delete', n: 1 }))).toBe('from history');
  });

  it('write: records a statement that changed a document, not one that matched nothing', async () => {
    const history = historyOf(undefined);
    const record = (result: StatementResult) =>
      inPhase('write', none, async (h) => void (await h!.record(manager, [{ index: 0, shardKey: undefined, result }])))(history);
    await record({ op: 'update', n: 0, nModified: 0 });
    await record({ op: 'delete', n: 0 });
    await record({ op: 'findAndModify', lastErrorObject: { n: 0, updatedExisting: false } });
    await record({ op: 'update', n: 1, nModified: 0 });
    await record({ op: 'findAndModify', lastErrorObject: { n: 1, updatedExisting: true } });
    expect(history.records.map((r) => r.map((s) => s.result.op))).toEqual([[], [], [], ['update'], ['findAndModify']]);
  });

  it('leaves an ordinary command as it is', async () => {
    const history = historyOf(undefined);
    await inPhase(
      undefined,
      none,
      async (h) => void (await h!.record(manager, [{ index: 0, shardKey: undefined, result: { op: 'delete', n: 0 } }])),
    )(history);
    expect(history.records).toHaveLength(1);
  });
});
