import { describe, expect, it } from 'vitest';
import { Bulkhead } from './bulkhead.js';

/** A task that ends when the test says so, noting when it started. */
function gate(started: string[], name: string) {
  let open!: () => void;
  const done = new Promise<void>((resolve) => (open = resolve));
  return { task: async () => (started.push(name), await done, name), open };
}

describe('Bulkhead', () => {
  it('runs `concurrency` tasks at once, the waiting ones in order, and refuses past `maxWaiting`', async () => {
    const bulkhead = new Bulkhead(2, 1);
    const started: string[] = [];
    const [a, b, c] = ['a', 'b', 'c'].map((name) => gate(started, name));
    const refusal = () => new Error('full');
    const runs = [bulkhead.run(a!.task, refusal), bulkhead.run(b!.task, refusal), bulkhead.run(c!.task, refusal)];
    await expect(bulkhead.run(async () => 'd', refusal)).rejects.toThrow('full');
    await Promise.resolve();
    expect(started).toEqual(['a', 'b']);
    expect(bulkhead.load).toEqual({ running: 2, waiting: 1 });
    a!.open();
    await runs[0];
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['a', 'b', 'c']);
    b!.open();
    c!.open();
    expect(await Promise.all(runs)).toEqual(['a', 'b', 'c']);
    expect(bulkhead.load).toEqual({ running: 0, waiting: 0 });
  });

  it('gives the turn of a task that threw to the next', async () => {
    const bulkhead = new Bulkhead(1, 5);
    const failing = bulkhead.run(
      async () => Promise.reject(new Error('boom')),
      () => new Error('full'),
    );
    const next = bulkhead.run(
      async () => 'next',
      () => new Error('full'),
    );
    await expect(failing).rejects.toThrow('boom');
    expect(await next).toBe('next');
    expect(bulkhead.load).toEqual({ running: 0, waiting: 0 });
  });
});
