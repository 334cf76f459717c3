import { describe, expect, it } from 'vitest';
import { parseWorkloadOptions } from './options.ts';
import { buildSummary, textSummary, workloadThresholds } from './summary.ts';

const env = { ADMIN_TOKEN: 'admin-token-0123456789' };

describe('thresholds and the summary', () => {
  it('fails a run on 0.1% errors and on p99 above P99_MS; add-shard-under-load allows no error and needs data on the new shard', () => {
    expect(workloadThresholds(parseWorkloadOptions('insert-random', { ...env, P99_MS: '300' }))).toEqual({
      tessera_errors: ['rate<0.001'],
      tessera_request_ms: ['p(99)<300'],
    });
    expect(workloadThresholds(parseWorkloadOptions('add-shard-under-load', env))).toMatchObject({
      tessera_errors: ['rate==0'],
      tessera_watched_shard_chunks: ['value>0'],
    });
    expect(workloadThresholds(parseWorkloadOptions('subscriptions', env))).toMatchObject({ tessera_ws_events: ['count>0'] });
  });

  it('reads the report and the verdicts out of k6 summary data', () => {
    const options = parseWorkloadOptions('insert-random', env);
    const summary = buildSummary(options, {
      state: { testRunDurationMs: 65_000 },
      metrics: {
        tessera_errors: { type: 'rate', values: { rate: 0.002 }, thresholds: { 'rate<0.001': { ok: false } } },
        tessera_request_ms: {
          type: 'trend',
          values: { med: 5, 'p(95)': 9, 'p(99)': 20, max: 40, count: 1000 },
          thresholds: { 'p(99)<1000': { ok: true } },
        },
        tessera_documents_inserted: { type: 'counter', values: { count: 9980, rate: 160 } },
        tessera_splits: { type: 'gauge', values: { value: 31, min: 31, max: 31 } },
        tessera_migrations: { type: 'gauge', values: { value: 4, min: 4, max: 4 } },
      },
    });
    expect(summary).toMatchObject({
      passed: false,
      failedThresholds: ['tessera_errors: rate<0.001'],
      report: { tessera_splits: 31, tessera_migrations: 4 },
      load: { requests: 1000, errorRate: 0.002, documentsInserted: 9980 },
    });
    expect(JSON.stringify(summary)).not.toContain(env.ADMIN_TOKEN);
    const text = textSummary(summary, 'x.json');
    expect(text).toContain('insert-random: FAILED in 65.0 s');
    expect(text).toContain('threshold failed: tessera_errors: rate<0.001');
    expect(text).toContain('31 splits, 4 migrations');
  });

  it('fails a transactions run on money made or destroyed and on no commit, and shows the transfers beside the balances', () => {
    const options = parseWorkloadOptions('transactions', env);
    expect(workloadThresholds(options)).toMatchObject({ tessera_balance_drift: ['value==0'], tessera_txn_commits: ['count>0'] });
    const summary = buildSummary(options, {
      metrics: {
        tessera_txn_commits: { type: 'counter', values: { count: 640, rate: 10 } },
        tessera_txn_aborts: { type: 'counter', values: { count: 90, rate: 1.5 } },
        tessera_txn_retries: { type: 'counter', values: { count: 55, rate: 1 } },
        tessera_txn_commit_ms: { type: 'trend', values: { med: 12, 'p(99)': 80, count: 640 } },
        tessera_balance_drift: { type: 'gauge', values: { value: -3 }, thresholds: { 'value==0': { ok: false } } },
        tessera_balance_total: { type: 'gauge', values: { value: 9997 } },
        tessera_accounts: { type: 'gauge', values: { value: 100 } },
        tessera_transfers_committed: { type: 'gauge', values: { value: 640.5 } },
      },
    });
    expect(summary).toMatchObject({
      passed: false,
      failedThresholds: ['tessera_balance_drift: value==0'],
      load: { txnCommits: 640, txnAborts: 90, txnRetries: 55, txnCommitRetries: null, txnGivenUp: null },
    });
    const text = textSummary(summary, 'x.json');
    expect(text).toContain(
      'transfers committed 640 (in the data 640.5), aborts 90, transactions retried 55, commits retried 0, given up 0',
    );
    expect(text).toContain('balances: 100 accounts hold 9997, drift -3');
  });

  it('fails a router-roll run on any failed insert and on no router seen quiescing, and shows the stored documents beside the acknowledged ones', () => {
    const options = parseWorkloadOptions('router-roll', env);
    expect(workloadThresholds(options)).toMatchObject({
      tessera_errors: ['rate==0'],
      tessera_documents_inserted: ['count>0'],
      'tessera_router_outs{reason:ShutdownInProgress}': ['count>0'],
    });
    const summary = buildSummary(options, {
      metrics: {
        tessera_errors: { type: 'rate', values: { rate: 0 }, thresholds: { 'rate==0': { ok: true } } },
        tessera_documents_inserted: { type: 'counter', values: { count: 5000 } },
        tessera_router_outs: { type: 'counter', values: { count: 14 } },
        'tessera_router_outs{reason:ShutdownInProgress}': {
          type: 'counter',
          values: { count: 0 },
          thresholds: { 'count>0': { ok: false } },
        },
        tessera_router_retries: { type: 'counter', values: { count: 3 } },
        tessera_documents: { type: 'gauge', values: { value: 5000 } },
      },
    });
    expect(summary).toMatchObject({
      passed: false,
      failedThresholds: ['tessera_router_outs{reason:ShutdownInProgress}: count>0'],
      load: { routerOuts: 14, routerOutsOnQuiesce: 0, routerRetries: 3 },
    });
    expect(textSummary(summary, 'x.json')).toContain(
      'routers taken out 14 (on ShutdownInProgress 0), inserts sent again 3; documents stored 5000 of 5000 acknowledged',
    );
  });

  it('says so when the teardown report is missing', () => {
    const summary = buildSummary(parseWorkloadOptions('crud-mix', env), { metrics: {} });
    expect(summary.report).toBeNull();
    expect(textSummary(summary, 'x.json')).toContain('cluster report: missing');
  });
});
