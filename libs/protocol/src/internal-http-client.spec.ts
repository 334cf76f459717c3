import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { InternalHttpClient, createInternalAgent } from './internal-http-client.js';

/** A node that answers every request with a peer's unreachability, as a donor relays its recipient's. */
let server: Server;
let url: string;
const agent = createInternalAgent();

beforeAll(async () => {
  server = createServer((_request, response) => {
    const error = new TesseraError('HOST_UNREACHABLE', 'POST http://127.0.0.1:1/internal/x failed: ECONNREFUSED', {
      details: { url: 'http://127.0.0.1:1', reason: 'ECONNREFUSED' },
    });
    response.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: error.toEnvelope() }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await agent.close();
  await new Promise((resolve) => server.close(resolve));
});

async function failure(client: InternalHttpClient): Promise<TesseraError> {
  const error = await client.call('POST', '/internal/x', {}).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TesseraError);
  return error as TesseraError;
}

describe('InternalHttpClient errors say who answered them', () => {
  it('marks an error rebuilt from a node answer as answered by that node, the code and details as relayed', async () => {
    const error = await failure(new InternalHttpClient(url, { clusterKey: 'k', dispatcher: agent }));
    expect(error).toMatchObject({ code: 'HOST_UNREACHABLE', answeredBy: url, details: { url: 'http://127.0.0.1:1' } });
    expect(error.toEnvelope()).not.toHaveProperty('answeredBy');
  });

  it('leaves a transport failure unanswered: the node may never have seen the request', async () => {
    const closed = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const port = (probe.address() as AddressInfo).port;
        probe.close(() => resolve(port));
      });
    });
    const error = await failure(new InternalHttpClient(`http://127.0.0.1:${closed}`, { clusterKey: 'k', dispatcher: agent }));
    expect(error.code).toBe('HOST_UNREACHABLE');
    expect(error.answeredBy).toBeUndefined();
  });
});
