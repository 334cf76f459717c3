// A stand-in for the k6 runtime, enough to run the workload scripts' lifecycle functions in
// vitest: k6/http answered by a fake cluster (every GraphQL request validated against
// schema.graphql), k6/metrics recording samples, k6/execution's counters, k6/timers and
// k6/websockets driven by the test. It checks the scripts' wiring (scenarios, exec functions,
// thresholds on defined metrics, setup -> VU code -> teardown -> handleSummary), not k6 itself.
import { readFileSync } from 'node:fs';
import { buildSchema, parse, validate } from 'graphql';

const schema = buildSchema(readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8'));

export interface Sample {
  value: number;
  tags?: Record<string, string>;
}

interface HttpCall {
  url: string;
  body: unknown;
  headers: Record<string, string>;
}

interface HttpParams {
  headers?: Record<string, string>;
}

interface FakeState {
  metrics: Map<string, { type: string; samples: Sample[] }>;
  http: HttpCall[];
  sockets: FakeWebSocket[];
  timers: Array<() => void>;
  iteration: number;
  vuIteration: number;
  /** Retryable writes answered so far, by lsid and txnNumber: a repeat is answered from here. */
  retryableAnswers: Map<string, unknown>;
  graphqlProblems: string[];
  reset(): void;
  samples(name: string): Sample[];
}

// One state whichever copy of this module a mock factory loads.
const holder = globalThis as { tesseraFakeK6?: FakeState };
export const fake: FakeState = (holder.tesseraFakeK6 ??= {
  metrics: new Map(),
  http: [],
  sockets: [],
  timers: [],
  iteration: 0,
  vuIteration: 0,
  retryableAnswers: new Map(),
  graphqlProblems: [],
  reset(): void {
    this.http = [];
    this.sockets = [];
    this.timers = [];
    this.iteration = 0;
    this.vuIteration = 0;
    this.retryableAnswers = new Map();
    this.graphqlProblems = [];
    // Metrics are created once, when the first script imports the driver (init context): keep
    // the registry, drop the samples.
    for (const metric of this.metrics.values()) metric.samples = [];
  },
  samples(name: string): Sample[] {
    return this.metrics.get(name)?.samples ?? [];
  },
});

const SHARDS = ['shard0', 'shard1', 'shard2'];

/** The fake cluster's answers, by GraphQL operation name or router command. */
function answer(url: string, body: unknown): { status: number; body: unknown } {
  if (url.endsWith('/graphql')) {
    const request = body as { query: string; variables: Record<string, unknown>; operationName?: string };
    const problems = validate(schema, parse(request.query)).map((e) => e.message);
    if (problems.length > 0) fake.graphqlProblems.push(...problems);
    const ns = request.variables.ns as string | undefined;
    switch (request.operationName) {
      case 'DropCollection':
        return {
          status: 200,
          body: { data: null, errors: [{ message: 'no such collection', extensions: { code: 'NAMESPACE_NOT_FOUND' } }] },
        };
      case 'ClusterBaseline':
        return {
          status: 200,
          body: { data: { cluster: { lastEventSeq: 10, shards: SHARDS.map((name) => ({ name, state: 'active' })) } } },
        };
      case 'Distribution':
        return {
          status: 200,
          body: {
            data: {
              cluster: { shards: [...SHARDS, 'shard3'].map((name) => ({ name })) },
              collection: {
                ns,
                collectionVersion: '5|0',
                distribution: [
                  { shard: 'shard0', chunks: 3, estimatedDataBytes: 3000 },
                  { shard: 'shard1', chunks: 2, estimatedDataBytes: 2000 },
                  { shard: 'shard3', chunks: 1, estimatedDataBytes: 1000 },
                ],
              },
            },
          },
        };
      case 'Changelog':
        return {
          status: 200,
          body: {
            data: {
              changelog: {
                nodes: [
                  { seq: 11, time: new Date().toISOString(), kind: 'multi-split', shard: 'shard0', details: { pieces: 4 } },
                  { seq: 12, time: new Date().toISOString(), kind: 'split', shard: 'shard0', details: { pieces: 2 } },
                  { seq: 13, time: new Date().toISOString(), kind: 'moveChunk.commit', shard: 'shard0', details: {} },
                ],
                pageInfo: { endCursor: '13', hasNextPage: false },
              },
            },
          },
        };
      case 'BalancerChangelog':
        return {
          status: 200,
          body: {
            data: {
              changelog: {
                nodes: [
                  { seq: 14, time: new Date().toISOString(), kind: 'balancer.throttle', shard: null, details: { state: 'throttled' } },
                  {
                    seq: 15,
                    time: new Date().toISOString(),
                    kind: 'balancer.round',
                    shard: null,
                    details: { throttle: { state: 'throttled' }, held: { count: 1, why: 'paused' } },
                  },
                ],
                pageInfo: { endCursor: '15', hasNextPage: false },
              },
            },
          },
        };
      case 'BalancerCollectionStatus':
        return { status: 200, body: { data: { balancerCollectionStatus: { balancerCompliant: true, firstComplianceViolation: null } } } };
      case 'AddShard':
        return { status: 200, body: { data: { addShard: { name: request.variables.name, url: request.variables.url, state: 'active' } } } };
      default:
        return { status: 200, body: { data: { ok: true } } };
    }
  }
  const command = url.slice(url.lastIndexOf('/') + 1);
  // A retryable write sent again is answered as the first time, its one statement from history.
  // A transaction's commands share their lsid and txnNumber, and are not retryable writes.
  const { lsid, txnNumber, autocommit } = body as { lsid?: { id: { $uuid: string } }; txnNumber?: number; autocommit?: false };
  if (lsid !== undefined && txnNumber !== undefined && autocommit === undefined) {
    const key = `${lsid.id.$uuid}/${txnNumber}`;
    const first = fake.retryableAnswers.get(key);
    if (first !== undefined) return { status: 200, body: { ...(first as object), retriedStmtIds: [0] } };
    const reply = answerCommand(command, body);
    fake.retryableAnswers.set(key, reply.body);
    return reply;
  }
  return answerCommand(command, body);
}

function answerCommand(command: string, body: unknown): { status: number; body: unknown } {
  switch (command) {
    case 'insert':
      return { status: 200, body: { insertedCount: (body as { documents: unknown[] }).documents.length, writeErrors: [] } };
    case 'find': {
      const { filter, readConcern } = body as { filter?: { _id?: unknown }; readConcern?: { level?: string } };
      // The transactions workload's teardown reads every account at one time: the default 100 of 100 each, untouched.
      if (readConcern?.level === 'snapshot')
        return {
          status: 200,
          body: { cursor: { id: '0', firstBatch: Array.from({ length: 100 }, (_, _id) => ({ _id, balance: 100, transfers: 0 })) } },
        };
      return { status: 200, body: { cursor: { id: '0', firstBatch: [{ _id: filter?._id ?? 1, balance: 100, transfers: 0 }] } } };
    }
    case 'update':
      return { status: 200, body: { matchedCount: 1, modifiedCount: 1, writeErrors: [] } };
    case 'count': {
      // Every document: the transactions workload's default 100 accounts (setup counts them through each router); none matches a filter.
      const filter = (body as { filter?: object }).filter ?? {};
      return { status: 200, body: { n: Object.keys(filter).length === 0 ? 100 : 0 } };
    }
    case 'commitTransaction':
      return { status: 200, body: { ok: 1, recoveryToken: { recoveryShardId: 'shard0' } } };
    case 'abortTransaction':
      return { status: 200, body: { ok: 1 } };
    default:
      return { status: 404, body: { ok: 0, codeName: 'NotFound' } };
  }
}

export const http = {
  default: {
    post(url: string, body: string, params: HttpParams = {}) {
      const parsed = JSON.parse(body) as unknown;
      fake.http.push({ url, body: parsed, headers: params.headers ?? {} });
      const reply = answer(url, parsed);
      return { status: reply.status, body: JSON.stringify(reply.body), timings: { duration: 2 } };
    },
    /** Only a router's hello is asked with GET: every router of the fake cluster serves. */
    get(url: string, params: HttpParams = {}) {
      fake.http.push({ url, body: null, headers: params.headers ?? {} });
      const reply = url.endsWith('/v1/hello')
        ? { status: 200, body: { isWritablePrimary: true, msg: 'isdbgrid', topologyVersion: { processId: 'fake', counter: 0 }, ok: 1 } }
        : { status: 404, body: { ok: 0, codeName: 'NotFound' } };
      return { status: reply.status, body: JSON.stringify(reply.body), timings: { duration: 1 } };
    },
    expectedStatuses: (...statuses: number[]) => ({ statuses }),
  },
};

class Metric {
  constructor(
    readonly name: string,
    type: string,
  ) {
    fake.metrics.set(name, { type, samples: [] });
  }
  add(value: number | boolean, tags?: Record<string, string>): void {
    fake.metrics.get(this.name)!.samples.push({ value: Number(value), tags });
  }
}

export const metrics = {
  Counter: class extends Metric {
    constructor(name: string) {
      super(name, 'counter');
    }
  },
  Gauge: class extends Metric {
    constructor(name: string) {
      super(name, 'gauge');
    }
  },
  Rate: class extends Metric {
    constructor(name: string) {
      super(name, 'rate');
    }
  },
  Trend: class extends Metric {
    constructor(name: string) {
      super(name, 'trend');
    }
  },
};

export const execution = {
  default: {
    get scenario() {
      return { iterationInTest: fake.iteration++ };
    },
    get vu() {
      return { idInTest: 1, iterationInScenario: fake.vuIteration++ };
    },
  },
};

export const k6 = { sleep: () => undefined, check: () => true };

export const timers = {
  setTimeout(callback: () => void): number {
    fake.timers.push(callback);
    return fake.timers.length;
  },
};

export class FakeWebSocket {
  static readonly OPEN = 1;
  readyState = 1;
  sent: string[] = [];
  closed = false;
  onopen: () => void = () => undefined;
  onmessage: (event?: { data: string }) => void = () => undefined;
  onerror: (event?: { error: string }) => void = () => undefined;
  onclose: () => void = () => undefined;

  constructor(
    readonly url: string,
    _protocols: null,
    readonly params: { headers?: Record<string, string> },
  ) {
    fake.sockets.push(this);
  }
  send(data: string): void {
    this.sent.push(data);
  }
  close(): void {
    this.closed = true;
    this.readyState = 3;
    this.onclose();
  }
}

export const websockets = { WebSocket: FakeWebSocket };
