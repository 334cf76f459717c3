import { UseGuards } from '@nestjs/common';
import { Args, Float, Int, Query, Resolver, Subscription } from '@nestjs/graphql';
import { map } from 'rxjs';
import type { ClusterEvent, EventTopic } from '@tessera/protocol';
import { EventBusService } from '../events/event-bus.service.js';
import type { EventFilter } from '../events/event-bus.js';
import { toAsyncIterator } from './async-iterator.js';
import { ControlPlaneGuard } from './control-plane.guard.js';
import { ControlPlaneReadsService } from './control-plane-reads.service.js';
import { ChangelogFilterInput, EventConnectionType, EventType, PlacementChangeType } from './graphql-types.js';
import { placementChangeOf } from './placement-change.js';

const identity = (value: unknown) => value;

/**
 * The changelog as a paginated query, and the live streams. Every subscription takes `since`:
 * the last seq the client saw; it then gets every later event first, with nothing missed.
 */
@Resolver()
@UseGuards(ControlPlaneGuard)
export class EventsResolver {
  constructor(
    private readonly events: EventBusService,
    private readonly reads: ControlPlaneReadsService,
  ) {}

  @Query(() => EventConnectionType, { description: 'Changelog entries oldest first; pass pageInfo.endCursor as after for the next page.' })
  changelog(
    @Args('filter', { type: () => ChangelogFilterInput, nullable: true }) filter?: ChangelogFilterInput,
    @Args('from', { type: () => String, nullable: true, description: 'ISO-8601, inclusive' }) from?: string,
    @Args('to', { type: () => String, nullable: true, description: 'ISO-8601, exclusive' }) to?: string,
    @Args('after', { type: () => String, nullable: true, description: 'a seq' }) after?: string,
    @Args('first', { type: () => Int, defaultValue: 100 }) first = 100,
  ): Promise<EventConnectionType> {
    return this.reads.changelog({
      first,
      ...(filter?.ns ? { ns: filter.ns } : {}),
      ...(filter?.kinds ? { kinds: filter.kinds } : {}),
      ...(filter?.topics ? { topics: filter.topics } : {}),
      ...(from ? { from } : {}),
      ...(to ? { to } : {}),
      ...(after ? { after: Number(after) } : {}),
    });
  }

  @Subscription(() => EventType, { name: 'changelog', description: 'Every event matching the filter.', resolve: identity })
  changelogEvents(
    @Args('filter', { type: () => ChangelogFilterInput, nullable: true }) filter?: ChangelogFilterInput,
    @Args('since', { type: () => Float, nullable: true }) since?: number,
  ): AsyncIterableIterator<ClusterEvent> {
    const kinds = filter?.kinds && new Set(filter.kinds);
    const topics = filter?.topics;
    return this.stream(
      (e) =>
        (filter?.ns === undefined || filter.ns === null || e.ns === filter.ns) &&
        (kinds === undefined || kinds === null || kinds.has(e.kind)) &&
        (topics === undefined || topics === null || e.topics.some((t) => topics.includes(t))),
      since,
    );
  }

  @Subscription(() => PlacementChangeType, {
    description: 'Splits, merges, migration commits and jumbo flags, with the chunks before and after.',
    resolve: identity,
  })
  chunkPlacementChanged(
    @Args('ns', { type: () => String, nullable: true }) ns?: string,
    @Args('since', { type: () => Float, nullable: true }) since?: number,
  ): AsyncIterableIterator<PlacementChangeType> {
    return toAsyncIterator(this.events.stream(topicFilter('placement', ns), since ?? undefined).pipe(map(placementChangeOf)));
  }

  @Subscription(() => EventType, { description: 'Migration phases and progress as donors and recipients report them.', resolve: identity })
  migrationProgress(
    @Args('ns', { type: () => String, nullable: true }) ns?: string,
    @Args('since', { type: () => Float, nullable: true }) since?: number,
  ): AsyncIterableIterator<ClusterEvent> {
    return this.stream(topicFilter('migrations', ns), since);
  }

  @Subscription(() => EventType, { description: 'Shards added, draining or removed, and shard zone changes.', resolve: identity })
  topologyChanged(@Args('since', { type: () => Float, nullable: true }) since?: number): AsyncIterableIterator<ClusterEvent> {
    return this.stream(topicFilter('topology'), since);
  }

  @Subscription(() => EventType, {
    description: 'Each balancer round (balancer.round): the migrations it issued with their reasons and outcomes, or why it moved nothing.',
    resolve: identity,
  })
  balancerRound(@Args('since', { type: () => Float, nullable: true }) since?: number): AsyncIterableIterator<ClusterEvent> {
    return this.stream((e) => e.kind === 'balancer.round', since);
  }

  private stream(filter: EventFilter, since: number | null | undefined): AsyncIterableIterator<ClusterEvent> {
    return toAsyncIterator(this.events.stream(filter, since ?? undefined));
  }
}

function topicFilter(topic: EventTopic, ns?: string | null): EventFilter {
  return (e) => e.topics.includes(topic) && (ns === undefined || ns === null || e.ns === ns);
}
