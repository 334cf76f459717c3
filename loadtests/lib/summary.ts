// Thresholds, and what handleSummary() writes: a JSON summary with the workload's options, the
// cluster report teardown() emitted as tessera_* metrics, each threshold's verdict and the
// latency figures, plus a short text version for the console.

import { type WorkloadOptions, describeOptions } from './options.ts';
import { REPORT_METRICS, type ReportMetric } from './report.ts';

/** Custom metrics the scripts record during the load. */
export const LOAD_METRICS = {
  /** Rate: share of router requests (and websocket sessions) that failed. */
  errors: 'tessera_errors',
  /** Trend (ms): router request latency, setup and teardown calls excluded. */
  requestMs: 'tessera_request_ms',
  /** Counter: documents acknowledged by the router. */
  documentsInserted: 'tessera_documents_inserted',
  /** Counter / Trend (ms): placement changes received over graphql-ws, and their lag. */
  wsEvents: 'tessera_ws_events',
  wsEventLagMs: 'tessera_ws_event_lag_ms',
  /** Trend (ms): from opening the websocket to connection_ack. */
  wsHandshakeMs: 'tessera_ws_handshake_ms',
  /** Counters (retryable-writes): writes sent a second time, and those answered from the session's history. */
  retriesSent: 'tessera_retries_sent',
  retriesFromHistory: 'tessera_retries_from_history',
  /** Counters (transactions): transfers committed; attempts aborted, tagged by reason; whole transactions run again; commits sent again; transfers given up, tagged by end. */
  txnCommits: 'tessera_txn_commits',
  txnAborts: 'tessera_txn_aborts',
  txnRetries: 'tessera_txn_retries',
  txnCommitRetries: 'tessera_txn_commit_retries',
  txnGivenUp: 'tessera_txn_given_up',
  /** Trend (ms, transactions): from the first commitTransaction to the answer that it committed. */
  txnCommitMs: 'tessera_txn_commit_ms',
  /** Counters (router-roll): routers taken out of a VU's pool, tagged by reason and by what saw it (hello or an operation); operations sent again through the next router. */
  routerOuts: 'tessera_router_outs',
  routerRetries: 'tessera_router_retries',
} as const;

/** router-roll's pool taking a router out on its quiesce signal: a run that never sees it did not roll a router. */
export const QUIESCE_OUTS = `${LOAD_METRICS.routerOuts}{reason:ShutdownInProgress}`;

/** k6 reports these statistics for every Trend (p(99) is not in k6's default list). */
export const SUMMARY_TREND_STATS = ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)', 'count'];

/**
 * The run fails (k6 exits 99) on more than 0.1% errors (none at all for add-shard-under-load and
 * router-roll), or
 * on a p99 latency above P99_MS (default 1000 ms: generous on purpose, the load generator shares
 * the machine with the cluster; tighten it on real hardware).
 */
export function workloadThresholds(options: WorkloadOptions): Record<string, string[]> {
  const thresholds: Record<string, string[]> = {
    [LOAD_METRICS.errors]: [options.maxErrorRate === 0 ? 'rate==0' : `rate<${options.maxErrorRate}`],
    [LOAD_METRICS.requestMs]: [`p(99)<${options.p99Ms}`],
  };
  if (options.workload === 'subscriptions') {
    thresholds[LOAD_METRICS.wsEvents] = ['count>0'];
    thresholds[LOAD_METRICS.wsEventLagMs] = [`p(99)<${options.p99Ms}`];
  }
  if (options.workload === 'add-shard-under-load') thresholds.tessera_watched_shard_chunks = ['value>0'];
  if (options.workload === 'retryable-writes') thresholds.tessera_doubled_writes = ['value==0'];
  if (options.workload === 'transactions') {
    thresholds.tessera_balance_drift = ['value==0'];
    thresholds[LOAD_METRICS.txnCommits] = ['count>0'];
  }
  if (options.workload === 'router-roll') {
    thresholds[LOAD_METRICS.documentsInserted] = ['count>0'];
    thresholds[QUIESCE_OUTS] = ['count>0'];
  }
  return thresholds;
}

/** The part of k6's summary data handleSummary() reads (the object has more). */
export interface K6SummaryData {
  metrics: Record<string, { type: string; values: Record<string, number>; thresholds?: Record<string, { ok: boolean }> }>;
  state?: { testRunDurationMs?: number };
}

export interface WorkloadSummary {
  workload: string;
  options: Record<string, string | number>;
  passed: boolean;
  testRunDurationMs: number | null;
  /** Failed thresholds as "metric: expression". */
  failedThresholds: string[];
  /** The teardown report, from the tessera_* metrics; null when they are missing from the summary. */
  report: Partial<Record<ReportMetric, number>> | null;
  load: {
    requests: number | null;
    errorRate: number | null;
    documentsInserted: number | null;
    latencyMs: Record<string, number> | null;
    wsEvents: number | null;
    wsEventLagMs: Record<string, number> | null;
    retriesSent: number | null;
    retriesFromHistory: number | null;
    txnCommits: number | null;
    txnAborts: number | null;
    txnRetries: number | null;
    txnCommitRetries: number | null;
    txnGivenUp: number | null;
    txnCommitMs: Record<string, number> | null;
    routerOuts: number | null;
    routerOutsOnQuiesce: number | null;
    routerRetries: number | null;
  };
}

export function buildSummary(options: WorkloadOptions, data: K6SummaryData): WorkloadSummary {
  const failedThresholds: string[] = [];
  for (const [name, metric] of Object.entries(data.metrics))
    for (const [expression, verdict] of Object.entries(metric.thresholds ?? {}))
      if (!verdict.ok) failedThresholds.push(`${name}: ${expression}`);
  const report: Partial<Record<ReportMetric, number>> = {};
  for (const name of REPORT_METRICS) {
    const value = data.metrics[name]?.values.value;
    if (value !== undefined) report[name] = value;
  }
  const values = (name: string) => data.metrics[name]?.values ?? null;
  return {
    workload: options.workload,
    options: describeOptions(options),
    passed: failedThresholds.length === 0,
    testRunDurationMs: data.state?.testRunDurationMs ?? null,
    failedThresholds,
    report: Object.keys(report).length === 0 ? null : report,
    load: {
      requests: values(LOAD_METRICS.requestMs)?.count ?? null,
      errorRate: values(LOAD_METRICS.errors)?.rate ?? null,
      documentsInserted: values(LOAD_METRICS.documentsInserted)?.count ?? null,
      latencyMs: values(LOAD_METRICS.requestMs),
      wsEvents: values(LOAD_METRICS.wsEvents)?.count ?? null,
      wsEventLagMs: values(LOAD_METRICS.wsEventLagMs),
      retriesSent: values(LOAD_METRICS.retriesSent)?.count ?? null,
      retriesFromHistory: values(LOAD_METRICS.retriesFromHistory)?.count ?? null,
      txnCommits: values(LOAD_METRICS.txnCommits)?.count ?? null,
      txnAborts: values(LOAD_METRICS.txnAborts)?.count ?? null,
      txnRetries: values(LOAD_METRICS.txnRetries)?.count ?? null,
      txnCommitRetries: values(LOAD_METRICS.txnCommitRetries)?.count ?? null,
      txnGivenUp: values(LOAD_METRICS.txnGivenUp)?.count ?? null,
      txnCommitMs: values(LOAD_METRICS.txnCommitMs),
      routerOuts: values(LOAD_METRICS.routerOuts)?.count ?? null,
      routerOutsOnQuiesce: values(QUIESCE_OUTS)?.count ?? null,
      routerRetries: values(LOAD_METRICS.routerRetries)?.count ?? null,
    },
  };
}

/** The console version of the summary (k6 prints nothing else once handleSummary exists). */
export function textSummary(summary: WorkloadSummary, summaryPath: string): string {
  const fixed = (v: number | undefined | null, digits = 1) => (v === undefined || v === null ? '-' : v.toFixed(digits));
  const latency = summary.load.latencyMs;
  const lines = [
    '',
    `tessera ${summary.workload}: ${summary.passed ? 'PASSED' : 'FAILED'}${summary.testRunDurationMs === null ? '' : ` in ${fixed(summary.testRunDurationMs / 1000)} s`}`,
    `  requests ${summary.load.requests ?? '-'}, errors ${summary.load.errorRate === null ? '-' : `${fixed(summary.load.errorRate * 100, 3)}%`}, documents inserted ${summary.load.documentsInserted ?? '-'}`,
    `  latency ms: p50 ${fixed(latency?.med)}  p95 ${fixed(latency?.['p(95)'])}  p99 ${fixed(latency?.['p(99)'])}  max ${fixed(latency?.max)}`,
  ];
  if (summary.load.wsEvents !== null)
    lines.push(
      `  graphql-ws events ${summary.load.wsEvents}, lag ms p50 ${fixed(summary.load.wsEventLagMs?.med)} p99 ${fixed(summary.load.wsEventLagMs?.['p(99)'])}`,
    );
  if (summary.load.retriesSent !== null || summary.report?.tessera_doubled_writes !== undefined)
    lines.push(
      `  retries sent ${summary.load.retriesSent ?? 0}, answered from history ${summary.load.retriesFromHistory ?? 0}; documents ${summary.report?.tessera_documents ?? '-'}, doubled writes ${summary.report?.tessera_doubled_writes ?? '-'}, $inc not applied ${summary.report?.tessera_unapplied_incs ?? '-'}`,
    );
  if (summary.load.txnCommits !== null || summary.report?.tessera_balance_drift !== undefined)
    lines.push(
      `  transfers committed ${summary.load.txnCommits ?? 0} (in the data ${summary.report?.tessera_transfers_committed ?? '-'}), aborts ${summary.load.txnAborts ?? 0}, transactions retried ${summary.load.txnRetries ?? 0}, commits retried ${summary.load.txnCommitRetries ?? 0}, given up ${summary.load.txnGivenUp ?? 0}; commit ms p50 ${fixed(summary.load.txnCommitMs?.med)} p99 ${fixed(summary.load.txnCommitMs?.['p(99)'])}`,
      `  balances: ${summary.report?.tessera_accounts ?? '-'} accounts hold ${summary.report?.tessera_balance_total ?? '-'}, drift ${summary.report?.tessera_balance_drift ?? '-'}`,
    );
  if (summary.workload === 'router-roll')
    lines.push(
      `  routers taken out ${summary.load.routerOuts ?? 0} (on ShutdownInProgress ${summary.load.routerOutsOnQuiesce ?? 0}), inserts sent again ${summary.load.routerRetries ?? 0}; documents stored ${summary.report?.tessera_documents ?? '-'} of ${summary.load.documentsInserted ?? '-'} acknowledged`,
    );
  if (summary.report === null)
    lines.push('  cluster report: missing (teardown did not run or its metrics did not reach the summary; see its log lines)');
  else
    lines.push(
      `  cluster: ${summary.report.tessera_chunks ?? '-'} chunks on ${summary.report.tessera_shards_with_chunks ?? '-'} shards (imbalance ${summary.report.tessera_chunk_imbalance ?? '-'}), ${summary.report.tessera_splits ?? '-'} splits, ${summary.report.tessera_migrations ?? '-'} migrations, compliant ${summary.report.tessera_compliant === undefined ? '?' : summary.report.tessera_compliant === 1 ? 'yes' : 'no'}`,
    );
  for (const failed of summary.failedThresholds) lines.push(`  threshold failed: ${failed}`);
  lines.push(`  JSON summary: ${summaryPath}`, '');
  return lines.join('\n');
}
