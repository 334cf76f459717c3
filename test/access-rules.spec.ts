/**
 * Every public door has exactly one access rule: each route of the router's OpenAPI document,
 * each root field of the control plane's schema and each socket.io room kind. And the rules
 * that read their input name the resources MongoDB would check.
 */
import { readFileSync } from 'node:fs';
import { buildSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { AUDIT_ROOM, type AccessRule, EVENT_TOPICS, GRAPHQL_ACCESS_RULES, REST_ACCESS_RULES, SOCKET_ACCESS_RULES } from '@tessera/protocol';
import { isAuthorized } from '@tessera/core';
import { describedRoutes } from '../apps/router/src/openapi/openapi-document.js';

const schema = buildSchema(readFileSync(new URL('../schema.graphql', import.meta.url), 'utf8'));

function rootFields(): string[] {
  return [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()].flatMap((type) =>
    type === null || type === undefined ? [] : Object.keys(type.getFields()).map((name) => `${type.name}.${name}`),
  );
}

function needs(rule: AccessRule | undefined, params: Record<string, string>, body: unknown) {
  if (rule?.kind !== 'privileges') throw new Error(`expected a privileges rule, got ${rule?.kind}`);
  return rule
    .needs({ params, body })
    .map((n) => `${n.action} ${'cluster' in n.resource ? 'cluster' : `${n.resource.db}.${n.resource.collection ?? ''}`}`);
}

describe('the access rules', () => {
  it('cover every route of the OpenAPI document, and name no route it lacks', () => {
    expect(Object.keys(REST_ACCESS_RULES).sort()).toEqual(describedRoutes().sort());
  });

  it('cover every root field of the GraphQL schema, and name no field it lacks', () => {
    expect(rootFields().length).toBeGreaterThan(30);
    expect(Object.keys(GRAPHQL_ACCESS_RULES).sort()).toEqual(rootFields().sort());
  });

  it('cover every socket.io topic and namespace rooms', () => {
    expect(Object.keys(SOCKET_ACCESS_RULES).sort()).toEqual([...EVENT_TOPICS.map((t) => `topic:${t}`), 'ns:', AUDIT_ROOM].sort());
  });

  it('leave only hello and the API description public, and only whoAmI to any user of the control plane', () => {
    const open = Object.entries(REST_ACCESS_RULES).filter(([, rule]) => rule.kind === 'public');
    expect(open.map(([route]) => route).sort()).toEqual(['GET /v1/docs', 'GET /v1/hello', 'GET /v1/openapi.json']);
    const unprivileged = Object.entries(GRAPHQL_ACCESS_RULES).filter(([, rule]) => rule.kind !== 'privileges');
    expect(unprivileged.map(([field, rule]) => `${field} ${rule.kind}`)).toEqual(['Query.whoAmI signedIn']);
    expect(Object.values(SOCKET_ACCESS_RULES).every((rule) => rule.kind === 'privileges')).toBe(true);
  });

  it('ask of every privileged door something root has and a user without roles lacks', () => {
    const input = { params: { db: 'shop', coll: 'orders', id: '1', name: 'x_1' }, body: { ns: 'shop.orders', db: 'shop' } };
    for (const [door, rule] of [
      ...Object.entries(REST_ACCESS_RULES),
      ...Object.entries(GRAPHQL_ACCESS_RULES),
      ...Object.entries(SOCKET_ACCESS_RULES),
    ]) {
      if (rule.kind !== 'privileges') continue;
      const required = rule.needs(input);
      if (door === 'POST /v1/admin/renameCollection' || door === 'POST /v1/admin/bulkWrite') continue;
      expect(required.length, door).toBeGreaterThan(0);
      for (const { action, resource } of required) {
        expect(isAuthorized([{ role: 'root', db: 'admin' }], action, resource), `${door}: root, ${action}`).toBe(true);
        expect(isAuthorized([], action, resource), `${door}: nobody, ${action}`).toBe(false);
      }
    }
  });

  it('read the resources of bulkWrite, renameCollection, findAndModify, update and aggregate from their input', () => {
    const bulk = {
      nsInfo: [{ ns: 'a.x' }, { ns: 'b.y' }],
      ops: [
        { insert: 0, document: {} },
        { update: 1, filter: {}, updateMods: {}, upsert: true },
        { delete: 0, filter: {} },
      ],
    };
    expect(needs(REST_ACCESS_RULES['POST /v1/admin/bulkWrite'], {}, bulk)).toEqual([
      'insert a.x',
      'update b.y',
      'insert b.y',
      'remove a.x',
    ]);
    expect(needs(REST_ACCESS_RULES['POST /v1/admin/bulkWrite'], {}, { nsInfo: 'x', ops: [] })).toEqual([]);
    expect(needs(REST_ACCESS_RULES['POST /v1/admin/renameCollection'], {}, { renameCollection: 'a.x', to: 'a.y' })).toEqual([
      'renameCollectionSameDB a.x',
      'renameCollectionSameDB a.y',
    ]);
    const ns = { db: 'a', coll: 'x' };
    expect(needs(REST_ACCESS_RULES['POST /v1/{db}/{coll}/findAndModify'], ns, { remove: true })).toEqual(['find a.x', 'remove a.x']);
    expect(needs(REST_ACCESS_RULES['POST /v1/{db}/{coll}/findAndModify'], ns, { update: {}, upsert: true })).toEqual([
      'find a.x',
      'update a.x',
      'insert a.x',
    ]);
    expect(needs(REST_ACCESS_RULES['POST /v1/{db}/{coll}/update'], ns, { updates: [{ q: {}, u: {}, upsert: true }] })).toEqual([
      'update a.x',
      'insert a.x',
    ]);
    const pipeline = [
      { $lookup: { from: 'y', pipeline: [{ $unionWith: { coll: 'z' } }], as: 'j' } },
      { $merge: { into: { db: 'b', coll: 'out' } } },
    ];
    expect(needs(REST_ACCESS_RULES['POST /v1/{db}/{coll}/aggregate'], ns, { pipeline })).toEqual([
      'find a.x',
      'find a.y',
      'find a.z',
      'insert b.out',
      'update b.out',
    ]);
    expect(needs(REST_ACCESS_RULES['POST /v1/{db}/{coll}/aggregate'], ns, { pipeline: [{ $out: 'o' }] })).toEqual([
      'find a.x',
      'insert a.o',
      'remove a.o',
    ]);
    expect(needs(GRAPHQL_ACCESS_RULES['Mutation.shardCollection'], {}, { input: { ns: 'a.x', key: {} } })).toEqual(['enableSharding a.x']);
    expect(needs(GRAPHQL_ACCESS_RULES['Mutation.dropDatabase'], {}, { db: 'a' })).toEqual(['dropDatabase a.']);
  });
});
