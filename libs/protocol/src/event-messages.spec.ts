import { describe, expect, it } from 'vitest';
import { type EventTopic, isEventTopic, topicsOfKind } from './event-messages.js';

describe('topicsOfKind', () => {
  it.each<[string, EventTopic[]]>([
    ['split', ['placement']],
    ['multi-split', ['placement']],
    ['moveChunk.commit', ['placement', 'migrations']],
    ['moveChunk.progress', ['migrations']],
    ['moveRange.end', ['migrations']],
    ['migration.recovered', ['migrations']],
    ['balancer.round', ['balancer']],
    ['addShard', ['topology']],
    ['removeShard.start', ['topology']],
    ['shardCollection.end', ['placement', 'ddl']],
    ['createDatabase', ['ddl']],
    ['updateZoneKeyRange', ['placement']],
    ['session.started', ['sessions']],
    ['transaction.committed', ['transactions']],
    ['routerStarted', ['reports']],
    ['movechunk.commit', ['reports']],
  ])('gives %s the topics %j', (kind, topics) => {
    expect(topicsOfKind(kind)).toEqual(topics);
  });

  it('knows the topic names and nothing else', () => {
    expect(['placement', 'reports', 'splits', ''].map(isEventTopic)).toEqual([true, true, false, false]);
  });
});
