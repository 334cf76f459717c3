import { ObjectId } from 'bson';
import Fastify from 'fastify';
import pg from 'pg';
import { Agent, request } from 'undici';
import { encodeKey, extractShardKey, parseShardKeyPattern } from '@tessera/core';

/**
 * The server side of bench:crud's floor: the cluster's two HTTP hops with nothing else. A relay
 * (where the router sits) parses the request, splits the documents by `k` over the stores and
 * forwards them, group-committed per store as the router's insert coalescer does (while one
 * insert to a store is under way, the documents that arrive for it wait and go together); a
 * store (where a shard sits) writes its documents with the raw baseline's one statement and keys
 * (an ObjectId `_id`, the hashed key of `k`). No versions, no validation, no Extended JSON
 * decoding, no signatures: what any router and shard written on Node's HTTP stack would pay on
 * this machine before doing their work.
 *
 *   node hop-floor-server.js store <port> <database url>
 *   node hop-floor-server.js relay <port> <store url>,<store url>,...
 */
const [role, portText, target] = process.argv.slice(2);
const port = Number(portText);
const app = Fastify({ bodyLimit: 64 * 1024 * 1024 });

interface Document {
  k: number;
  [field: string]: unknown;
}

/** The rows' keys are the raw baseline's: an ObjectId `_id` and the hashed shard key of `k`. */
const pattern = parseShardKeyPattern({ k: 'hashed' });
const keyOf = (k: number) => Buffer.from(encodeKey(extractShardKey(pattern, { k })));

if (role === 'store') {
  const pool = new pg.Pool({ connectionString: target, max: 16 });
  const table = `floor_${port}`;
  await pool.query(
    `CREATE TABLE ${table} (id bytea PRIMARY KEY, shard_key bytea NOT NULL, doc json NOT NULL, size integer NOT NULL, valid_from int8 NOT NULL)`,
  );
  await pool.query(`CREATE INDEX ON ${table} (shard_key)`);
  app.post('/insert', async (req) => {
    const { documents } = req.body as { documents: Document[] };
    const _ids = documents.map(() => new ObjectId());
    const ids = _ids.map((_id) => Buffer.from(encodeKey([_id])));
    const keys = documents.map((d) => keyOf(d.k));
    const texts = documents.map((d, i) => JSON.stringify({ _id: { $oid: _ids[i]!.toHexString() }, ...d }));
    await pool.query(
      `INSERT INTO ${table} (id, shard_key, doc, size, valid_from)
       SELECT *, $5::int8 FROM ROWS FROM (unnest($1::bytea[]), unnest($2::bytea[]), json_array_elements($3::json), unnest($4::int[]))`,
      [ids, keys, `[${texts.join(',')}]`, texts.map((t) => t.length), Date.now()],
    );
    return { n: documents.length };
  });
  app.post('/find', async (req) => {
    const { k } = req.body as { k: number };
    const { rows } = await pool.query(`SELECT doc FROM ${table} WHERE shard_key = $1`, [keyOf(k)]);
    return { documents: rows.map((r: { doc: unknown }) => r.doc) };
  });
} else if (role === 'relay') {
  const stores = target!.split(',');
  const agent = new Agent({ connections: 32 });
  const call = async (store: string, path: string, body: unknown) => {
    const response = await request(`${store}${path}`, {
      dispatcher: agent,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return (await response.body.json()) as { n: number; documents: unknown[] };
  };
  /** One insert in flight per store; what arrives meanwhile waits and goes as one request. */
  const lanes = stores.map((url) => ({
    url,
    busy: false,
    waiting: [] as Array<{ documents: Document[]; done: (error?: unknown) => void }>,
  }));
  const drain = (lane: (typeof lanes)[number]) => {
    if (lane.busy || lane.waiting.length === 0) return;
    const group = lane.waiting.splice(0);
    lane.busy = true;
    call(lane.url, '/insert', { documents: group.flatMap((w) => w.documents) })
      .then(
        () => group.forEach((w) => w.done()),
        (error: unknown) => group.forEach((w) => w.done(error)),
      )
      .finally(() => {
        lane.busy = false;
        drain(lane);
      });
  };
  const insert = (lane: (typeof lanes)[number], documents: Document[]) =>
    new Promise<number>((resolve, reject) => {
      lane.waiting.push({ documents, done: (error) => (error === undefined ? resolve(documents.length) : reject(error)) });
      drain(lane);
    });
  app.post('/insert', async (req) => {
    const { documents } = req.body as { documents: Document[] };
    const byStore = stores.map(() => [] as Document[]);
    for (const document of documents) byStore[document.k % stores.length]!.push(document);
    const counts = await Promise.all(lanes.map((lane, i) => (byStore[i]!.length === 0 ? 0 : insert(lane, byStore[i]!))));
    return { insertedCount: counts.reduce((sum, n) => sum + n, 0) };
  });
  app.post('/find', async (req) => {
    const { filter } = req.body as { filter: { k: number } };
    const answer = await call(stores[filter.k % stores.length]!, '/find', { k: filter.k });
    return { cursor: { id: '0', firstBatch: answer.documents } };
  });
} else {
  throw new Error(`unknown role ${role}: expected store or relay`);
}

await app.listen({ port, host: '127.0.0.1' });
process.send?.('listening');
