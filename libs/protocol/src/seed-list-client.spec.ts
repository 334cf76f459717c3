import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInternalAgent } from './internal-http-client.js';
import { SeedListClient, seedUrls } from './seed-list-client.js';

/**
 * A seed list of three config processes: the first refuses connections (it is down), the second
 * drops every request it receives (it dies while answering), the third answers. Each counts what
 * it received.
 */
const agent = createInternalAgent();
const servers: Server[] = [];
const received = { dropping: 0, answering: 0 };
let down: string;
let dropping: string;
let answering: string;

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

beforeAll(async () => {
  const closed = await listen(() => undefined);
  down = closed.url;
  await new Promise((resolve) => closed.server.close(resolve));
  dropping = (
    await listen((request) => {
      received.dropping++;
      request.socket.destroy();
    })
  ).url;
  answering = (
    await listen((_request, response) => {
      received.answering++;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":1}');
    })
  ).url;
});

afterAll(async () => {
  await agent.close();
  for (const server of servers) if (server.listening) await new Promise((resolve) => server.close(resolve));
});

const client = (seedList: string) => new SeedListClient(seedList, { clusterKey: 'k', dispatcher: agent });

describe('a client of a seed list of config processes', () => {
  it('splits a seed list', () => {
    expect(seedUrls(' http://a:1, http://b:2 ,')).toEqual(['http://a:1', 'http://b:2']);
  });

  it('goes to the next process when one cannot be reached, and first to the one that answered after that', async () => {
    const seedList = `${down},${answering}`;
    expect(await client(seedList).call('POST', '/internal/x', {})).toEqual({ ok: 1 });
    expect(received.answering).toBe(1);
    // A new client of the same list starts with the process that answered.
    expect(client(seedList).baseUrl).toBe(answering);
  });

  it('does not send again a request a process may have received: it fails as it did', async () => {
    const before = { ...received };
    await expect(client(`${dropping},${answering}`).call('POST', '/internal/x', {})).rejects.toMatchObject({ code: 'HOST_UNREACHABLE' });
    expect(received.dropping).toBe(before.dropping + 1);
    expect(received.answering).toBe(before.answering);
  });

  it('fails with the last error when no process can be reached', async () => {
    await expect(client(`${down},${down}`).call('GET', '/internal/x')).rejects.toMatchObject({ code: 'HOST_UNREACHABLE' });
  });
});
