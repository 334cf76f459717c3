import pg from 'pg';
import { Agent, request } from 'undici';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';

export interface ApiResponse {
  status: number;
  json: Record<string, unknown>;
}

/** A client of a router's public API (bodies sent and answered as Extended JSON), for end-to-end tests. */
export class RouterApi {
  readonly agent: Agent;

  /**
   * `authorization`: the `Authorization` header every call sends (none by default); `ca`: the
   * certificate authority an `https:` router's certificate is trusted by.
   */
  constructor(
    private readonly router: string,
    readonly authorization?: string,
    ca?: Buffer,
  ) {
    this.agent = new Agent(ca === undefined ? {} : { connect: { ca } });
  }

  /** The headers of a call: its `Authorization`, if any, and JSON's content type when it has a body. */
  headers(withBody: boolean): Record<string, string> {
    return {
      ...(withBody ? { 'content-type': 'application/json' } : {}),
      ...(this.authorization === undefined ? {} : { authorization: this.authorization }),
    };
  }

  async call(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<ApiResponse> {
    const response = await request(`${this.router}${path}`, {
      dispatcher: this.agent,
      method,
      headers: this.headers(body !== undefined),
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.body.text();
    return { status: response.statusCode, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
  }

  /** Every document a find returns, following the cursor to its end. Throws on an error answer. */
  async findAll(ns: string, query: Record<string, unknown>): Promise<unknown[]> {
    const [db, coll] = ns.split('.');
    const first = await this.call('POST', `/v1/${db}/${coll}/find`, query);
    if (first.status !== 200) throw new Error(`find answered ${first.status}: ${JSON.stringify(first.json)}`);
    const cursor = first.json.cursor as { id: string; firstBatch: unknown[] };
    const documents = [...cursor.firstBatch];
    let id = cursor.id;
    while (id !== '0' && id !== null) {
      const next = await this.call('POST', `/v1/cursors/${id}/next`, {});
      if (next.status !== 200) throw new Error(`getMore answered ${next.status}: ${JSON.stringify(next.json)}`);
      const batch = next.json.cursor as { id: string; nextBatch: unknown[] };
      documents.push(...batch.nextBatch);
      id = batch.id;
    }
    return documents;
  }

  /** Inserts `documents` into `ns` in batches of `batchSize`. Throws on an error answer or a write error. */
  async insertMany(ns: string, documents: readonly unknown[], batchSize = 1000): Promise<void> {
    const [db, coll] = ns.split('.');
    for (let i = 0; i < documents.length; i += batchSize) {
      const answer = await this.call('POST', `/v1/${db}/${coll}/insert`, { documents: documents.slice(i, i + batchSize) });
      const writeErrors = answer.json.writeErrors as unknown[] | undefined;
      if (answer.status !== 200 || writeErrors === undefined || writeErrors.length > 0) {
        throw new Error(`insert into ${ns} answered ${answer.status}: ${JSON.stringify(answer.json)}`);
      }
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** Runs `work` on a shard's own database (to look behind the router: orphans, table contents). */
export async function onShardDatabase<T>(cluster: LocalCluster, shard: string, work: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const pool = new pg.Pool({ connectionString: cluster.node(shard).env.TESSERA_DATABASE_URL, max: 1 });
  try {
    return await work(pool);
  } finally {
    await pool.end();
  }
}

/** How many rows (orphans included) a shard stores for `ns`. */
export async function storedCount(cluster: LocalCluster, shard: string, ns: string): Promise<number> {
  return onShardDatabase(cluster, shard, async (pool) => {
    const rows = await pool.query<{ uuid: string }>('SELECT uuid FROM collections WHERE ns = $1', [ns]);
    if (rows.rows[0] === undefined) return 0;
    const table = `c_${rows.rows[0].uuid.replaceAll('-', '')}`;
    return Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);
  });
}

/**
 * True when none of `shards` holds any migration state (registration, coordinator, receipt,
 * range deletion) and the config server no migration record: a killed config server never hears
 * its donor's answer, so its record must go another way.
 */
export async function migrationStateSettled(cluster: LocalCluster, shards: readonly string[]): Promise<boolean> {
  const records = await onShardDatabase(
    cluster,
    'config',
    async (pool) => (await pool.query('SELECT 1 FROM active_migrations')).rows.length,
  );
  if (records > 0) return false;
  for (const shard of shards) {
    const busy = await onShardDatabase(cluster, shard, async (pool) => {
      const rows = await pool.query<{ n: string }>(
        `SELECT (SELECT count(*) FROM migration_registry) + (SELECT count(*) FROM migration_coordinators)
              + (SELECT count(*) FROM migration_recipients) + (SELECT count(*) FROM range_deletions) AS n`,
      );
      return Number(rows.rows[0]!.n);
    });
    if (busy > 0) return false;
  }
  return true;
}
