import { UseGuards } from '@nestjs/common';
import { Args, Float, Int, Query, Resolver, Subscription } from '@nestjs/graphql';
import type { ClusterEvent } from '@tessera/protocol';
import { EventBusService } from '../events/event-bus.service.js';
import { SessionsService } from '../sessions/sessions.service.js';
import { toAsyncIterator } from './async-iterator.js';
import { ControlPlaneGuard } from './control-plane.guard.js';
import { EventType } from './graphql-types.js';
import { SessionConnectionType, SessionFilterInput } from './session-types.js';

const identity = (value: unknown) => value;

/** The logical sessions: the sessions table a page at a time, and its events as they commit. */
@Resolver()
@UseGuards(ControlPlaneGuard)
export class SessionsResolver {
  constructor(
    private readonly sessions: SessionsService,
    private readonly events: EventBusService,
  ) {}

  @Query(() => SessionConnectionType, {
    name: 'sessions',
    description: 'Sessions in lsid order; pass pageInfo.endCursor as after for the next page.',
  })
  async sessionsPage(
    @Args('filter', { type: () => SessionFilterInput, nullable: true }) filter?: SessionFilterInput,
    @Args('first', { type: () => Int, defaultValue: 100 }) first = 100,
    @Args('after', { type: () => String, nullable: true, description: 'an lsid' }) after?: string,
  ): Promise<SessionConnectionType> {
    const page = await this.sessions.page({
      first,
      ...(after ? { after } : {}),
      ...(filter?.lsid ? { lsid: filter.lsid } : {}),
      ...(filter?.node ? { node: filter.node } : {}),
    });
    const last = page.sessions.at(-1);
    return {
      nodes: page.sessions,
      pageInfo: { hasNextPage: page.hasNextPage, endCursor: last?.lsid ?? null },
      totalCount: page.totalCount,
    };
  }

  @Subscription(() => EventType, {
    description: 'Events of the sessions topic: session.started, session.ended, session.expired, session.reaped, session.retryAnswered.',
    resolve: identity,
  })
  sessionEvents(@Args('since', { type: () => Float, nullable: true }) since?: number): AsyncIterableIterator<ClusterEvent> {
    return toAsyncIterator(this.events.stream((e) => e.topics.includes('sessions'), since ?? undefined));
  }
}
