import { beforeEach, describe, expect, it, vi } from 'vitest';
import { WORKLOADS, type WorkloadName } from '../../loadtests/lib/index.ts';
import { type FakeWebSocket, fake } from './fake-k6.ts';

// Runs each k6 script's lifecycle in a fake k6 (./fake-k6.ts): k6 itself is not installed in
// CI, and the type check cannot tell whether a scenario's exec function exists, whether a
// threshold names a metric the script defines (k6 refuses to start otherwise) or whether the
// report gets from teardown into the summary.
vi.mock('k6', async () => (await import('./fake-k6.ts')).k6);
vi.mock('k6/http', async () => (await import('./fake-k6.ts')).http);
vi.mock('k6/metrics', async () => (await import('./fake-k6.ts')).metrics);
vi.mock('k6/execution', async () => (await import('./fake-k6.ts')).execution);
vi.mock('k6/timers', async () => (await import('./fake-k6.ts')).timers);
vi.mock('k6/websockets', async () => (await import('./fake-k6.ts')).websockets);

interface Script {
  options: { scenarios: Record<string, { exec?: string }>; thresholds: Record<string, string[]> };
  setup(): { ns: string; startSeq: number };
  teardown(data: unknown): void;
  handleSummary(data: unknown): Record<string, string>;
  [exec: string]: unknown;
}

const BUILT_IN = new Set(['http_req_duration', 'http_req_failed', 'http_reqs', 'checks', 'iteration_duration']);
(globalThis as { __ENV?: Record<string, string> }).__ENV = {
  ADMIN_TOKEN: 'admin-token-0123456789',
  API_KEY: 'tsk_0123456789ab_api-key',
  DURATION: '10s',
  SETTLE: '1s',
  SEED_DOCS: '25',
  BATCH: '5',
};

async function load(name: WorkloadName): Promise<Script> {
  // A variable path, so the main type check does not follow it into the k6 scripts.
  const path = `../../loadtests/${name}.ts`;
  return (await import(/* @vite-ignore */ path)) as Script;
}

/** What k6 would hand handleSummary, built from the samples the fake recorded. */
function summaryData(): unknown {
  const metrics: Record<string, { type: string; values: Record<string, number> }> = {};
  for (const [name, metric] of fake.metrics) {
    const values = metric.samples.map((s) => s.value);
    if (values.length === 0) continue;
    const sum = values.reduce((a, b) => a + b, 0);
    metrics[name] = {
      type: metric.type,
      values:
        metric.type === 'gauge'
          ? { value: values[values.length - 1]! }
          : metric.type === 'rate'
            ? { rate: sum / values.length }
            : {
                count: values.length,
                med: values[0]!,
                'p(95)': Math.max(...values),
                'p(99)': Math.max(...values),
                max: Math.max(...values),
              },
    };
  }
  return { metrics, state: { testRunDurationMs: 10_000 } };
}

/** A subscriber's session: open, ack, one placement change, then the end-of-run timer. */
function driveSubscriber(socket: FakeWebSocket): void {
  socket.onopen();
  expect(JSON.parse(socket.sent[0]!)).toEqual({ type: 'connection_init', payload: { authorization: 'Bearer admin-token-0123456789' } });
  socket.onmessage({ data: JSON.stringify({ type: 'connection_ack' }) });
  const subscribe = JSON.parse(socket.sent[1]!) as { type: string; payload: { variables: Record<string, unknown> } };
  expect(subscribe).toMatchObject({ type: 'subscribe', payload: { variables: { ns: 'load.subscriptions', since: 10 } } });
  socket.onmessage({ data: JSON.stringify({ type: 'ping' }) });
  expect(JSON.parse(socket.sent[2]!)).toEqual({ type: 'pong' });
  const change = { seq: 11, time: new Date(Date.now() + 5).toISOString(), reason: 'split' };
  socket.onmessage({ data: JSON.stringify({ id: 'placement', type: 'next', payload: { data: { chunkPlacementChanged: change } } }) });
  for (const timer of fake.timers.splice(0)) timer();
  expect(socket.closed).toBe(true);
}

beforeEach(() => {
  fake.reset();
  // The scripts print teardown's report; keep the test output readable.
  vi.spyOn(console, 'log').mockImplementation(() => undefined);
});

describe('the k6 scripts in a fake k6', () => {
  it.each(WORKLOADS)(
    '%s: every scenario runs an exported function, thresholds name defined metrics, and the report reaches the summary',
    async (name) => {
      const script = await load(name);

      for (const [scenario, settings] of Object.entries(script.options.scenarios))
        expect(typeof script[settings.exec ?? 'default'], `scenario ${scenario}`).toBe('function');
      for (const threshold of Object.keys(script.options.thresholds)) {
        const metric = threshold.split('{')[0]!;
        expect(fake.metrics.has(metric) || BUILT_IN.has(metric), `threshold on ${metric}`).toBe(true);
      }

      const data = script.setup();
      expect(data).toMatchObject({ ns: `load.${name.replaceAll('-', '_')}`, startSeq: 10 });
      expect(fake.http.filter((c) => c.url.endsWith('/graphql')).length).toBeGreaterThanOrEqual(5);

      for (const settings of Object.values(script.options.scenarios)) {
        const exec = script[settings.exec ?? 'default'] as (data: unknown) => void;
        for (let i = 0; i < 20; i++) {
          exec(data);
          if (settings.exec === 'subscribe' || settings.exec === 'addNewShard') break;
        }
      }
      for (const socket of fake.sockets) driveSubscriber(socket);

      script.teardown(data);
      expect(fake.graphqlProblems).toEqual([]);
      expect(fake.samples('tessera_errors').length).toBeGreaterThan(0);
      expect(fake.samples('tessera_errors').every((s) => s.value === 0)).toBe(true);
      expect(fake.samples('tessera_splits').map((s) => s.value)).toEqual([2]);
      expect(fake.samples('tessera_migrations').map((s) => s.value)).toEqual([1]);

      const outputs = script.handleSummary(summaryData());
      const path = `loadtests/results/${name}-summary.json`;
      expect(Object.keys(outputs).sort()).toEqual([path, 'stdout']);
      const summary = JSON.parse(outputs[path]!) as { passed: boolean; report: Record<string, number>; options: Record<string, unknown> };
      expect(summary.report).toMatchObject({
        tessera_chunks: 6,
        tessera_splits: 2,
        tessera_migrations: 1,
        tessera_throttle_rounds_held: 1,
        tessera_throttle_changes: 1,
      });
      expect(JSON.stringify(summary.options)).not.toContain('admin-token');
      expect(JSON.stringify(summary.options)).not.toContain('api-key');
      // Every request to a router signs in with the API key; the control plane's with the admin token.
      const toRouters = fake.http.filter((c) => !c.url.endsWith('/graphql'));
      expect(toRouters.length).toBeGreaterThan(0);
      for (const call of toRouters) expect(call.headers.authorization, call.url).toBe('Bearer tsk_0123456789ab_api-key');
      expect(outputs.stdout).toContain(`tessera ${name}:`);
      if (name === 'subscriptions') {
        expect(fake.sockets[0]!.params.headers).toEqual({ 'Sec-WebSocket-Protocol': 'graphql-transport-ws' });
        expect(fake.samples('tessera_ws_events')).toHaveLength(fake.sockets.length);
      }
      if (name === 'add-shard-under-load') {
        expect(fake.http.some((c) => (c.body as { operationName?: string }).operationName === 'AddShard')).toBe(true);
        expect(fake.samples('tessera_watched_shard_chunks').map((s) => s.value)).toEqual([1]);
      }
      if (name === 'retryable-writes') {
        // 20 iterations of an insert and an $inc; a fifth of them sent twice, each answered from history.
        const writes = fake.http.filter((c) => /\/(insert|update)$/.test(c.url));
        expect(writes.every((c) => (c.body as { txnNumber?: number }).txnNumber !== undefined)).toBe(true);
        expect(writes.length).toBeGreaterThan(40);
        const retries = fake.samples('tessera_retries_sent').reduce((sum, s) => sum + s.value, 0);
        expect(retries).toBe(writes.length - 40);
        expect(fake.samples('tessera_retries_from_history').reduce((sum, s) => sum + s.value, 0)).toBe(retries);
        expect(fake.samples('tessera_doubled_writes').map((s) => s.value)).toEqual([0]);
        expect(summary.report).toMatchObject({ tessera_doubled_writes: 0, tessera_unapplied_incs: 0 });
        expect(script.options.thresholds.tessera_doubled_writes).toEqual(['value==0']);
      }
      if (name === 'transactions') {
        // 20 transfers, none short of money: a find, two $incs and a commit each, all in the VU's transactions.
        const commands = fake.http.filter((c) => (c.body as { autocommit?: boolean }).autocommit === false);
        expect(commands).toHaveLength(80);
        const txnNumbers = new Set(commands.map((c) => (c.body as { txnNumber: number }).txnNumber));
        expect(txnNumbers.size).toBe(20);
        expect(commands.filter((c) => (c.body as { startTransaction?: boolean }).startTransaction === true)).toHaveLength(20);
        expect(commands.filter((c) => c.url.endsWith('/v1/admin/commitTransaction'))).toHaveLength(20);
        expect(fake.samples('tessera_txn_commits').reduce((sum, s) => sum + s.value, 0)).toBe(20);
        expect(fake.samples('tessera_txn_commit_ms')).toHaveLength(20);
        expect(fake.samples('tessera_balance_drift').map((s) => s.value)).toEqual([0]);
        expect(summary.report).toMatchObject({ tessera_accounts: 100, tessera_balance_total: 10_000, tessera_balance_drift: 0 });
        expect(script.options.thresholds).toMatchObject({ tessera_balance_drift: ['value==0'], tessera_txn_commits: ['count>0'] });
      }
      if (name === 'router-roll') {
        // 20 inserts of the VU's own documents, each a retryable write under the next txnNumber, after the VU's first hello.
        const inserts = fake.http.filter((c) => c.url.endsWith('/v1/load/router_roll/insert'));
        expect(inserts.map((c) => (c.body as { txnNumber: number }).txnNumber)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
        expect(new Set(inserts.map((c) => (c.body as { documents: Array<{ _id: string }> }).documents[0]!._id)).size).toBe(20);
        expect(fake.http.filter((c) => c.url.endsWith('/v1/hello')).length).toBeGreaterThanOrEqual(1);
        expect(fake.http.findIndex((c) => c.url.endsWith('/v1/hello'))).toBeLessThan(fake.http.indexOf(inserts[0]!));
        expect(fake.samples('tessera_documents_inserted').reduce((sum, s) => sum + s.value, 0)).toBe(20);
        // Teardown's count: the fake counts 100 documents whatever was inserted.
        expect(summary.report).toMatchObject({ tessera_documents: 100 });
        expect(script.options.thresholds).toMatchObject({
          tessera_errors: ['rate==0'],
          tessera_documents_inserted: ['count>0'],
          'tessera_router_outs{reason:ShutdownInProgress}': ['count>0'],
        });
      }
      if (name === 'crud-mix') expect(fake.http.filter((c) => c.url.endsWith('/insert')).length).toBeGreaterThanOrEqual(5);
    },
  );
});
