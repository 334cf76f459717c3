// The k6 side of the workloads: performs the lib's request sequences with k6/http, records the
// load metrics, emits the teardown report as metrics and writes the summary. Every script uses
// this; the workload logic itself is in ../lib (no k6 import there).

import { sleep } from 'k6';
import http, { type RefinedResponse, type ResponseType } from 'k6/http';
import { Counter, Gauge, Rate, Trend } from 'k6/metrics';
import {
  type BalanceCheck,
  type IterationOutcome,
  type K6SummaryData,
  LOAD_METRICS,
  REPORT_METRICS,
  SUMMARY_TREND_STATS,
  type ReportMetric,
  type RollOutcome,
  type RouterRequest,
  type Sequence,
  type SettleGoal,
  type SetupData,
  type StepAnswer,
  type TeardownReport,
  type TransferOutcome,
  type WorkloadOptions,
  type WriteCheck,
  balanceCheckMetrics,
  buildSummary,
  checkBalances,
  checkRetryableWrites,
  collectReport,
  countRolledDocuments,
  formatBalanceCheck,
  formatReport,
  formatRollCheck,
  formatWriteCheck,
  graphqlBody,
  judgeAnswer,
  reportMetrics,
  routerHeaders,
  textSummary,
  writeCheckMetrics,
} from '../lib/index.ts';

// Custom metrics must be created in the init context, so every script gets all of them; the ones
// a workload does not use stay empty and are left out of the summary by k6.
export const errors = new Rate(LOAD_METRICS.errors);
export const requestMs = new Trend(LOAD_METRICS.requestMs, true);
export const documentsInserted = new Counter(LOAD_METRICS.documentsInserted);
export const wsEvents = new Counter(LOAD_METRICS.wsEvents);
export const wsEventLagMs = new Trend(LOAD_METRICS.wsEventLagMs, true);
export const wsHandshakeMs = new Trend(LOAD_METRICS.wsHandshakeMs, true);
export const retriesSent = new Counter(LOAD_METRICS.retriesSent);
export const retriesFromHistory = new Counter(LOAD_METRICS.retriesFromHistory);
export const txnCommits = new Counter(LOAD_METRICS.txnCommits);
export const txnAborts = new Counter(LOAD_METRICS.txnAborts);
export const txnRetries = new Counter(LOAD_METRICS.txnRetries);
export const txnCommitRetries = new Counter(LOAD_METRICS.txnCommitRetries);
export const txnGivenUp = new Counter(LOAD_METRICS.txnGivenUp);
export const txnCommitMs = new Trend(LOAD_METRICS.txnCommitMs, true);
export const routerOuts = new Counter(LOAD_METRICS.routerOuts);
export const routerRetries = new Counter(LOAD_METRICS.routerRetries);
const reportGauges = Object.fromEntries(REPORT_METRICS.map((name) => [name, new Gauge(name)])) as Record<ReportMetric, Gauge>;

function parseBody(response: RefinedResponse<ResponseType | undefined>): unknown {
  const text = typeof response.body === 'string' ? response.body : '';
  try {
    return text === '' ? null : (JSON.parse(text) as unknown);
  } catch {
    return text;
  }
}

/** Runs a lib sequence to its end with k6/http (synchronous), returning what the sequence returns. */
export function runSequence<T>(options: WorkloadOptions, sequence: Sequence<T>): T {
  let next = sequence.next();
  while (!next.done) {
    const step = next.value;
    let answer: StepAnswer;
    switch (step.kind) {
      case 'graphql': {
        const response = http.post(`${options.configUrl}/graphql`, graphqlBody(step.request), {
          headers: { 'content-type': 'application/json', authorization: `Bearer ${options.adminToken}` },
          tags: { name: `graphql ${step.request.operation}` },
          responseCallback: http.expectedStatuses(200),
        });
        answer = { status: response.status, body: parseBody(response) };
        break;
      }
      case 'router': {
        const url = `${step.routerUrl ?? options.routerUrl}${step.path}`;
        const tags = { name: step.name ?? 'setup router' };
        const response =
          step.method === 'GET'
            ? http.get(url, { headers: routerHeaders(options), tags })
            : http.post(url, JSON.stringify(step.body), { headers: routerHeaders(options), tags });
        // The load's own requests (named steps) count in the latency; setup's and teardown's do not.
        if (step.name !== undefined) requestMs.add(response.timings.duration, { op: step.name });
        answer = { status: response.status, body: parseBody(response) };
        break;
      }
      case 'sleep':
        sleep(step.ms / 1000);
        answer = { status: 0, body: null };
        break;
    }
    next = sequence.next(answer);
  }
  return next.value;
}

/** Sends one workload request to the router and records latency, errors and inserted documents. Returns whether it succeeded. */
export function send(options: WorkloadOptions, request: RouterRequest): boolean {
  const response = http.post(`${options.routerUrl}${request.path}`, JSON.stringify(request.body), {
    headers: routerHeaders(options),
    tags: { name: request.name },
  });
  const verdict = judgeAnswer(request, response.status, parseBody(response));
  requestMs.add(response.timings.duration, { op: request.name });
  errors.add(!verdict.ok, { op: request.name });
  if (verdict.inserted !== undefined) documentsInserted.add(verdict.inserted);
  if (!verdict.ok) console.warn(`${request.name} failed: ${verdict.problem ?? 'unknown'}`);
  return verdict.ok;
}

/** Records what a retryable-writes iteration came to: each send's verdict, the retries, the documents acknowledged. */
export function recordIteration(outcome: IterationOutcome): void {
  for (const send of outcome.sends) {
    errors.add(!send.ok, { op: send.op });
    if (!send.ok) console.warn(`${send.op} failed: ${send.problem ?? 'unknown'}`);
  }
  if (outcome.inserted > 0) documentsInserted.add(outcome.inserted);
  if (outcome.retriesSent > 0) retriesSent.add(outcome.retriesSent);
  if (outcome.retriesFromHistory > 0) retriesFromHistory.add(outcome.retriesFromHistory);
}

/**
 * Records what a transfer came to: each request's verdict (the refusals the protocol expects are
 * not errors), its aborts by reason, its retries, and the commit or why it was given up.
 */
export function recordTransfer(outcome: TransferOutcome): void {
  for (const send of outcome.sends) {
    errors.add(!send.ok, { op: send.op });
    if (!send.ok) console.warn(`${send.op} failed: ${send.problem ?? 'unknown'}`);
  }
  for (const reason of outcome.aborts) txnAborts.add(1, { reason });
  if (outcome.txnRetries > 0) txnRetries.add(outcome.txnRetries);
  if (outcome.commitRetries > 0) txnCommitRetries.add(outcome.commitRetries);
  if (outcome.end === 'committed') txnCommits.add(1);
  if (outcome.commitMs !== null) txnCommitMs.add(outcome.commitMs);
  if (outcome.end === 'gaveUp' || outcome.end === 'failed' || outcome.end === 'unknown') txnGivenUp.add(1, { end: outcome.end });
}

/**
 * Records what a router-roll iteration came to: the insert's verdict (a send that met a router
 * going away and was sent again is not an error; the insert's end is), the document acknowledged,
 * the sends again, and the routers the VU's pool took out.
 */
export function recordRoll(outcome: RollOutcome): void {
  errors.add(!outcome.ok, { op: 'insert' });
  if (!outcome.ok) console.warn(`insert ${outcome.documentId} failed: ${outcome.problem ?? 'unknown'}`);
  if (outcome.ok) documentsInserted.add(1);
  if (outcome.retries > 0) routerRetries.add(outcome.retries);
  for (const event of outcome.events) if (event.kind === 'out') routerOuts.add(1, { reason: event.reason, via: event.via });
}

/** router-roll's teardown check: the documents stored, as a Gauge, to set beside tessera_documents_inserted. */
export function reportRolledDocuments(options: WorkloadOptions, setup: SetupData): number {
  const documents = runSequence(options, countRolledDocuments(setup.ns));
  reportGauges.tessera_documents.add(documents);
  console.log(formatRollCheck(setup.ns, documents));
  return documents;
}

/** transactions' teardown check: the balances' total against the opening total, and the committed transfers the data counts, as Gauges. */
export function reportBalanceCheck(options: WorkloadOptions, setup: SetupData): BalanceCheck {
  const check = runSequence(options, checkBalances(options));
  for (const [name, value] of Object.entries(balanceCheckMetrics(check))) reportGauges[name as ReportMetric].add(value);
  console.log(formatBalanceCheck(setup.ns, check));
  console.log(`tessera-balance-check ${JSON.stringify(check)}`);
  return check;
}

/** retryable-writes' teardown check: counts the documents whose n says a write doubled (or an $inc is missing), as Gauges. */
export function reportWriteCheck(options: WorkloadOptions, setup: SetupData): WriteCheck {
  const check = runSequence(options, checkRetryableWrites(setup.ns));
  for (const [name, value] of Object.entries(writeCheckMetrics(check))) reportGauges[name as ReportMetric].add(value);
  console.log(formatWriteCheck(setup.ns, check));
  console.log(`tessera-write-check ${JSON.stringify(check)}`);
  return check;
}

/**
 * teardown(): waits for `goal`, reads the report back from GraphQL, prints it, and emits it as
 * tessera_* Gauges. Samples added in teardown() reach the end-of-test summary and its thresholds
 * (k6 computes the summary after teardown; that is why teardown cannot see it), so handleSummary()
 * finds the report in `data.metrics`. The report is also printed as one JSON line
 * (`tessera-report {...}`) so it survives whatever output the run uses.
 */
export function reportTeardown(options: WorkloadOptions, setup: SetupData, goal: SettleGoal): TeardownReport {
  const report = runSequence(
    options,
    collectReport(options, setup, goal, () => Date.now()),
  );
  for (const [name, value] of Object.entries(reportMetrics(report))) reportGauges[name as ReportMetric].add(value);
  console.log(formatReport(report));
  console.log(`tessera-report ${JSON.stringify(report)}`);
  return report;
}

/** handleSummary(): the JSON summary at options.summaryPath and a short text on stdout. */
export function summaryOutputs(options: WorkloadOptions, data: unknown): Record<string, string> {
  const summary = buildSummary(options, data as K6SummaryData);
  return {
    [options.summaryPath]: `${JSON.stringify({ ...summary, k6: data }, null, 2)}\n`,
    stdout: textSummary(summary, options.summaryPath),
  };
}

/** Test-wide k6 options every workload shares: its thresholds, p99 in the summary, a teardown long enough to settle. */
export function commonOptions(options: WorkloadOptions, thresholds: Record<string, string[]>) {
  return {
    thresholds,
    summaryTrendStats: SUMMARY_TREND_STATS,
    setupTimeout: '120s',
    teardownTimeout: `${Math.ceil(options.settleMs / 1000) + 60}s`,
  };
}
