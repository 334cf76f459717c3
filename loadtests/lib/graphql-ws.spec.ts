import { describe, expect, it } from 'vitest';
import { GraphqlWsProtocol, eventLagMs, graphqlWsUrl } from './graphql-ws.ts';

const parse = (messages: string[]) => messages.map((m) => JSON.parse(m) as Record<string, unknown>);
const subscription = { id: 's1', query: 'subscription { x }', variables: { ns: 'a.b' } };

describe('the graphql-transport-ws client protocol', () => {
  it('sends the token in connection_init and subscribes only once the server acknowledges', () => {
    const protocol = new GraphqlWsProtocol('secret');
    expect(parse(protocol.open())).toEqual([{ type: 'connection_init', payload: { authorization: 'Bearer secret' } }]);
    expect(protocol.subscribe(subscription)).toEqual([]);
    const ack = protocol.receive(JSON.stringify({ type: 'connection_ack' }));
    expect(ack.events).toEqual([{ kind: 'acknowledged' }]);
    expect(parse(ack.send)).toEqual([{ id: 's1', type: 'subscribe', payload: { query: 'subscription { x }', variables: { ns: 'a.b' } } }]);
    expect(protocol.isAcknowledged).toBe(true);
    expect(parse(protocol.subscribe({ ...subscription, id: 's2' }))[0]).toMatchObject({ id: 's2', type: 'subscribe' });
  });

  it('answers a ping with a pong and passes data, errors and completion on', () => {
    const protocol = new GraphqlWsProtocol('t');
    expect(parse(protocol.receive('{"type":"ping"}').send)).toEqual([{ type: 'pong' }]);
    expect(protocol.receive('{"type":"next","id":"s1","payload":{"data":{"x":1}}}').events).toEqual([
      { kind: 'data', id: 's1', data: { x: 1 } },
    ]);
    expect(protocol.receive('{"type":"next","id":"s1","payload":{"errors":[{"message":"bad"}]}}').events).toEqual([
      { kind: 'error', id: 's1', message: 'bad' },
    ]);
    expect(protocol.receive('{"type":"error","id":"s1","payload":[{"message":"a"},{"message":"b"}]}').events).toEqual([
      { kind: 'error', id: 's1', message: 'a; b' },
    ]);
    expect(protocol.receive('{"type":"complete","id":"s1"}').events).toEqual([{ kind: 'complete', id: 's1' }]);
    expect(JSON.parse(protocol.complete('s1'))).toEqual({ id: 's1', type: 'complete' });
  });

  it('turns garbage into an error event rather than an exception', () => {
    const protocol = new GraphqlWsProtocol('t');
    expect(protocol.receive('not json').events[0]).toMatchObject({ kind: 'error', id: null });
    expect(protocol.receive('{"type":"surprise"}').events[0]).toMatchObject({ kind: 'error', message: 'unexpected message type surprise' });
  });

  it('finds the endpoint and measures lag from the commit time, never below 0', () => {
    expect(graphqlWsUrl('http://127.0.0.1:7080')).toBe('ws://127.0.0.1:7080/graphql');
    expect(graphqlWsUrl('https://cp.example')).toBe('wss://cp.example/graphql');
    const change = { seq: 1, time: '2026-11-23T10:00:00.000Z', reason: 'split' };
    expect(eventLagMs(change, Date.parse('2026-11-23T10:00:00.250Z'))).toBe(250);
    expect(eventLagMs(change, Date.parse('2026-11-23T09:59:59Z'))).toBe(0);
    expect(eventLagMs({ ...change, time: 'never' }, 0)).toBeNull();
  });
});
