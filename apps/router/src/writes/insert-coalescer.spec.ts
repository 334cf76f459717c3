import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import type { InsertCommand, InsertCommandResult } from '@tessera/protocol';
import { InsertCoalescer } from './insert-coalescer.js';

const V1 = { shardVersion: { epoch: 'e', timestamp: { t: 1, i: 0 }, major: 1, minor: 0 } } as never;
const V2 = { shardVersion: { epoch: 'e', timestamp: { t: 1, i: 0 }, major: 2, minor: 0 } } as never;

/** A fake shard that answers each command when the test says so; documents `{ bad: true }` fail. */
function fakeShard() {
  const sent: Array<{ shard: string; command: InsertCommand }> = [];
  const pending: Array<() => void> = [];
  let failWith: unknown;
  return {
    sent,
    failNext(error: unknown) {
      failWith = error;
    },
    /** Answers the oldest command under way. */
    answer() {
      pending.shift()!();
    },
    send: (shard: string, command: InsertCommand): Promise<InsertCommandResult> => {
      sent.push({ shard, command });
      const error = failWith;
      failWith = undefined;
      return new Promise((resolve, reject) => {
        pending.push(() => {
          if (error !== undefined) return reject(error);
          const inserted: InsertCommandResult['inserted'] = [];
          const writeErrors: InsertCommandResult['writeErrors'] = [];
          command.documents.forEach((doc, index) => {
            if ((doc as { bad?: boolean }).bad) {
              writeErrors.push({ index, error: new TesseraError('DUPLICATE_KEY', 'dup', { details: { index } }).toEnvelope() });
            } else inserted.push(index);
          });
          resolve({ insertedCount: inserted.length, inserted, writeErrors });
        });
      });
    },
  };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('coalescing inserts on the router', () => {
  it('a lone insert goes at once, unchanged', async () => {
    const shard = fakeShard();
    const coalescer = new InsertCoalescer(shard.send);
    const answer = coalescer.insert('A', 'db.c', V1, [{ _id: 1 }], true, 20);
    expect(shard.sent).toHaveLength(1);
    expect(shard.sent[0]!.command).toEqual({ ns: 'db.c', ...(V1 as object), ordered: true, documents: [{ _id: 1 }] });
    shard.answer();
    expect(await answer).toEqual({ insertedCount: 1, inserted: [0], writeErrors: [] });
  });

  it('inserts that arrive while one is under way go together as one unordered command, each answered by its own indexes', async () => {
    const shard = fakeShard();
    const coalescer = new InsertCoalescer(shard.send);
    const first = coalescer.insert('A', 'db.c', V1, [{ _id: 1 }], true, 20);
    const second = coalescer.insert('A', 'db.c', V1, [{ _id: 2 }, { _id: 3, bad: true }], false, 40);
    const third = coalescer.insert('A', 'db.c', V1, [{ _id: 4 }], true, 20);
    expect(shard.sent).toHaveLength(1);
    shard.answer();
    await first;
    await flush();
    expect(shard.sent).toHaveLength(2);
    expect(shard.sent[1]!.command.ordered).toBe(false);
    expect(shard.sent[1]!.command.documents).toEqual([{ _id: 2 }, { _id: 3, bad: true }, { _id: 4 }]);
    shard.answer();
    const [b, c] = await Promise.all([second, third]);
    expect(b.inserted).toEqual([0]);
    expect(b.writeErrors.map((e) => [e.index, e.error.details?.['index']])).toEqual([[1, 1]]);
    expect(c).toEqual({ insertedCount: 1, inserted: [0], writeErrors: [] });
  });

  it('an ordered batch of several documents is never combined with others', async () => {
    const shard = fakeShard();
    const coalescer = new InsertCoalescer(shard.send);
    void coalescer.insert('A', 'db.c', V1, [{ _id: 1 }], false, 20);
    void coalescer.insert('A', 'db.c', V1, [{ _id: 2 }, { _id: 3 }], true, 40);
    expect(shard.sent).toHaveLength(2);
    expect(shard.sent[1]!.command.ordered).toBe(true);
  });

  it('inserts for another shard, namespace or shard version do not wait for each other', () => {
    const shard = fakeShard();
    const coalescer = new InsertCoalescer(shard.send);
    void coalescer.insert('A', 'db.c', V1, [{ _id: 1 }], false, 20);
    void coalescer.insert('B', 'db.c', V1, [{ _id: 2 }], false, 20);
    void coalescer.insert('A', 'db.d', V1, [{ _id: 3 }], false, 20);
    void coalescer.insert('A', 'db.c', V2, [{ _id: 4 }], false, 20);
    expect(shard.sent).toHaveLength(4);
  });

  it('a combined command that fails (stale routing) fails every request in it, each to be retried by its own caller', async () => {
    const shard = fakeShard();
    const coalescer = new InsertCoalescer(shard.send);
    const first = coalescer.insert('A', 'db.c', V1, [{ _id: 1 }], false, 20);
    const second = coalescer.insert('A', 'db.c', V1, [{ _id: 2 }], false, 20);
    const third = coalescer.insert('A', 'db.c', V1, [{ _id: 3 }], false, 20);
    shard.failNext(new TesseraError('STALE_CONFIG', 'stale'));
    shard.answer();
    await first;
    await flush();
    shard.answer();
    await expect(second).rejects.toMatchObject({ code: 'STALE_CONFIG' });
    await expect(third).rejects.toMatchObject({ code: 'STALE_CONFIG' });
  });

  it('a combined command stays within the document limit; the rest goes next', async () => {
    const shard = fakeShard();
    const coalescer = new InsertCoalescer(shard.send, { maxInFlight: 1, maxDocuments: 3, maxBytes: 1_000 });
    const all = [coalescer.insert('A', 'db.c', V1, [{ _id: 0 }], false, 10)];
    for (let i = 1; i <= 4; i++) all.push(coalescer.insert('A', 'db.c', V1, [{ _id: i }], false, 10));
    shard.answer();
    await flush();
    expect(shard.sent.map((s) => s.command.documents.length)).toEqual([1, 3]);
    shard.answer();
    await flush();
    shard.answer();
    await Promise.all(all);
    expect(shard.sent.map((s) => s.command.documents.length)).toEqual([1, 3, 1]);
  });
});

describe('coalescing retryable inserts', () => {
  const session = (id: number, txnNumber: number, stmtIds = [0]) => ({
    lsid: { id: `00000000-0000-4000-8000-00000000000${id}` },
    txnNumber,
    stmtIds,
  });

  it('go together as one command of session parts, apart from plain inserts, each answered with its own retried stmtIds', async () => {
    const sent: InsertCommand[] = [];
    const answers: Array<(result: InsertCommandResult) => void> = [];
    const coalescer = new InsertCoalescer((_shard, command) => {
      sent.push(command);
      return new Promise((resolve) => answers.push(resolve));
    });
    const first = coalescer.insert('A', 'db.c', V1, [{ _id: 1 }], true, 20, session(1, 1));
    const plain = coalescer.insert('A', 'db.c', V1, [{ _id: 2 }], true, 20);
    const second = coalescer.insert('A', 'db.c', V1, [{ _id: 3 }, { _id: 4 }], false, 40, session(2, 5, [3, 4]));
    const third = coalescer.insert('A', 'db.c', V1, [{ _id: 5 }], true, 20, session(3, 1));
    // The retryable lane's first command names its session as a lone command does.
    expect(sent.map((c) => c.lsid?.id ?? null)).toEqual([session(1, 1).lsid.id, null]);
    answers[0]!({ insertedCount: 1, inserted: [0], writeErrors: [], retriedStmtIds: [0] });
    await flush();
    expect(sent[2]).toMatchObject({ ordered: false, sessionParts: [session(2, 5, [3, 4]), session(3, 1)] });
    expect(sent[2]!.lsid).toBeUndefined();
    answers[2]!({ insertedCount: 3, inserted: [0, 1, 2], writeErrors: [], retriedByPart: [[4], []] });
    answers[1]!({ insertedCount: 1, inserted: [0], writeErrors: [] });
    expect(await first).toMatchObject({ retriedStmtIds: [0] });
    expect(await second).toEqual({ insertedCount: 2, inserted: [0, 1], writeErrors: [], retriedStmtIds: [4] });
    expect(await third).toEqual({ insertedCount: 1, inserted: [0], writeErrors: [] });
    await plain;
  });

  it("a session's second insert waits for the next command", async () => {
    const sent: InsertCommand[] = [];
    const answers: Array<(result: InsertCommandResult) => void> = [];
    const coalescer = new InsertCoalescer((_shard, command) => {
      sent.push(command);
      return new Promise((resolve) => answers.push(resolve));
    });
    const all = [session(1, 1), session(2, 1), session(2, 2), session(3, 1)].map((s, i) =>
      coalescer.insert('A', 'db.c', V1, [{ _id: i }], true, 20, s),
    );
    answers[0]!({ insertedCount: 1, inserted: [0], writeErrors: [] });
    await flush();
    expect(sent[1]).toMatchObject({ ...session(2, 1), documents: [{ _id: 1 }] });
    answers[1]!({ insertedCount: 1, inserted: [0], writeErrors: [] });
    await flush();
    expect(sent[2]!.sessionParts).toEqual([session(2, 2), session(3, 1)]);
    answers[2]!({ insertedCount: 2, inserted: [0, 1], writeErrors: [] });
    await Promise.all(all);
  });

  it('a part refused as too old fails its own request, without the part number; the others go again', async () => {
    const sent: InsertCommand[] = [];
    const replies: Array<{ resolve(result: InsertCommandResult): void; reject(error: unknown): void }> = [];
    const coalescer = new InsertCoalescer((_shard, command) => {
      sent.push(command);
      return new Promise((resolve, reject) => replies.push({ resolve, reject }));
    });
    const first = coalescer.insert('A', 'db.c', V1, [{ _id: 0 }], true, 20, session(1, 1));
    const old = coalescer.insert('A', 'db.c', V1, [{ _id: 1 }], true, 20, session(2, 1));
    const fine = coalescer.insert('A', 'db.c', V1, [{ _id: 2 }], true, 20, session(3, 1));
    replies[0]!.resolve({ insertedCount: 1, inserted: [0], writeErrors: [] });
    await flush();
    replies[1]!.reject(new TesseraError('TRANSACTION_TOO_OLD', 'too old', { details: { txnNumber: 1, part: 0 } }));
    await expect(old).rejects.toMatchObject({ code: 'TRANSACTION_TOO_OLD', details: { txnNumber: 1 } });
    await expect(old).rejects.not.toHaveProperty('details.part');
    await flush();
    expect(sent[2]!.lsid).toEqual(session(3, 1).lsid);
    replies[2]!.resolve({ insertedCount: 1, inserted: [0], writeErrors: [] });
    expect(await fine).toEqual({ insertedCount: 1, inserted: [0], writeErrors: [] });
    await first;
  });
});
