import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { ConfigClient, MigrationClient } from '@tessera/protocol';
import { FakeNetwork } from './fake-network.js';

const RECIPIENT = 'http://recipient.test:4001';
const STATUS = '/internal/migration/recvChunkStatus';

function network(): FakeNetwork {
  const net = new FakeNetwork();
  net.node(RECIPIENT).on('POST', STATUS, (request) => ({
    migrationId: (request.body as { migrationId: string }).migrationId,
    state: 'steady',
    documentsCloned: 3,
    bytesCloned: 30,
    modsApplied: 0,
    sessionsMigrated: 0,
  }));
  return net;
}

async function failure(work: Promise<unknown>): Promise<TesseraError> {
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TesseraError);
  return error as TesseraError;
}

describe('the fake network', () => {
  it('carries a typed client request to the node handler and its answer back', async () => {
    const net = network();
    const client = new MigrationClient(RECIPIENT, net.clientOptions());
    await expect(client.recvChunkStatus('m1')).resolves.toMatchObject({ migrationId: 'm1', state: 'steady', documentsCloned: 3 });
    expect(net.callsTo(STATUS, RECIPIENT)).toHaveLength(1);
    expect(net.calls[0]?.body).toEqual({ migrationId: 'm1' });
  });

  it('answers text from a handler that returns a string', async () => {
    const net = network();
    net.node(RECIPIENT).on('POST', '/internal/migration/transferMods', () => '0\n');
    await expect(new MigrationClient(RECIPIENT, net.clientOptions()).transferMods({ migrationId: 'm1', limit: 10 })).resolves.toBe('0\n');
  });

  it("turns a handler's TesseraError into the envelope, rebuilt with its code and answeredBy", async () => {
    const net = network();
    net.node(RECIPIENT).on('POST', '/internal/migration/recvChunkCommit', () => {
      throw new TesseraError('DUPLICATE_KEY', 'an _id this shard already holds', { details: { ns: 'db.c' } });
    });
    const error = await failure(new MigrationClient(RECIPIENT, net.clientOptions()).recvChunkCommit('m1'));
    expect(error.code).toBe('DUPLICATE_KEY');
    expect(error.details).toEqual({ ns: 'db.c' });
    expect(error.answeredBy).toBe(RECIPIENT);
  });

  it('answers INTERNAL for any other error a handler throws', async () => {
    const net = network();
    net.node(RECIPIENT).on('POST', STATUS, () => {
      throw new Error('boom');
    });
    const error = await failure(new MigrationClient(RECIPIENT, net.clientOptions()).recvChunkStatus('m1'));
    expect(error.code).toBe('INTERNAL');
    expect(error.answeredBy).toBe(RECIPIENT);
  });

  it('makes an unreachable node a HOST_UNREACHABLE that no node answered, until it is reachable again', async () => {
    const net = network();
    const client = new MigrationClient(RECIPIENT, net.clientOptions());
    net.unreachable(RECIPIENT);
    const error = await failure(client.recvChunkStatus('m1'));
    expect(error.code).toBe('HOST_UNREACHABLE');
    expect(error.answeredBy).toBeUndefined();
    net.reachable(RECIPIENT);
    await expect(client.recvChunkStatus('m1')).resolves.toMatchObject({ state: 'steady' });
  });

  it('fails only the nth matching call, with the fault asked for', async () => {
    const net = network();
    const client = new MigrationClient(RECIPIENT, net.clientOptions());
    net.failNth({ method: 'POST', path: STATUS, nth: 2, fault: 'timeout' });
    await expect(client.recvChunkStatus('m1')).resolves.toMatchObject({ state: 'steady' });
    expect((await failure(client.recvChunkStatus('m1'))).code).toBe('NETWORK_TIMEOUT');
    await expect(client.recvChunkStatus('m1')).resolves.toMatchObject({ state: 'steady' });
  });

  it('fails `times` calls from the nth on with a given error, matched by pattern', async () => {
    const net = network();
    const client = new MigrationClient(RECIPIENT, net.clientOptions());
    net.failNth({ path: /recvChunk/, times: 2, fault: new TesseraError('NOT_LEADER', 'not the leader') });
    expect((await failure(client.recvChunkStatus('m1'))).code).toBe('NOT_LEADER');
    expect((await failure(client.recvChunkStatus('m1'))).code).toBe('NOT_LEADER');
    await expect(client.recvChunkStatus('m1')).resolves.toMatchObject({ state: 'steady' });
  });

  it('delays the nth matching call, then lets it through', async () => {
    const net = network();
    net.delayNth({ path: STATUS, ms: 50 });
    const started = performance.now();
    await expect(new MigrationClient(RECIPIENT, net.clientOptions()).recvChunkStatus('m1')).resolves.toMatchObject({ state: 'steady' });
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
  });

  it("hands a route's :name segments to the handler decoded, preferring a route without any", async () => {
    const net = network();
    const shard = 'http://shard0.test:4001';
    net
      .node(shard)
      .on('GET', '/internal/namespaces/:ns', (request) => ({ uuid: request.params.ns, keyPattern: { _id: 1 }, documents: 0 }))
      .on('GET', '/internal/namespaces/fixed', () => ({ uuid: 'fixed', keyPattern: { _id: 1 }, documents: 0 }));
    const client = net.internalClients().shard(shard);
    await expect(client.describeNamespace('app.a b')).resolves.toMatchObject({ uuid: 'app.a b' });
    await expect(client.describeNamespace('fixed')).resolves.toMatchObject({ uuid: 'fixed' });
    expect(net.calls[0]?.params).toEqual({ ns: 'app.a b' });
  });

  it('answers NOT_FOUND for a route no node registered', async () => {
    const net = network();
    const error = await failure(new ConfigClient('http://config.test:4000', net.clientOptions()).decideMigration('m1'));
    expect(error.code).toBe('NOT_FOUND');
  });

  it("gives the platform's InternalClients over HTTP", async () => {
    const net = network();
    await expect(net.internalClients().migration(RECIPIENT).recvChunkStatus('m2')).resolves.toMatchObject({ migrationId: 'm2' });
  });
});
