import { Inject, Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { SETTINGS, parseWith } from '@tessera/platform';
import { type RefreshSessionsResult, liveSessionsRequestSchema, refreshSessionsRequestSchema } from '@tessera/protocol';
import type { z } from 'zod';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { sessionChangelogEntries } from './session-changelog.js';
import { type SessionPage, SessionsStore } from './sessions.store.js';
import { mergeUsedSessions } from './used-sessions.js';

type Refresh = z.output<typeof refreshSessionsRequestSchema>;

const MAX_PAGE = 1_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The config server's side of the logical session cache's refresh (sharding-internals.md, "How
 * the logical session cache syncs with the sessions collection"). A refresh runs its steps in
 * the reference's order, in one transaction with their changelog rows, so a node's report
 * lands whole or not at all:
 *
 * 1. `upsertUsed`: the sessions used on the node since its last refresh are upserted (their
 *    last use only moves forward), and the node's `session_nodes` rows become what it caches.
 * 2. `removeEnded`: the sessions ended on the node (endSessions) are deleted, for every node.
 * 3. `answerExpired`: of the node's cached sessions, those the table no longer holds (expired
 *    or ended elsewhere); the node drops them and kills their cursors (step 4, on the node).
 * 4. `recordReports`: what a shard reaped and the retries a node answered from a session's
 *    history, as changelog rows only.
 *
 * Any config process serves refreshes; the expiry of unused sessions is the leader's
 * (`SessionExpiryService`).
 */
@Injectable()
export class SessionsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly store: SessionsStore,
    private readonly changelog: ChangelogService,
    @Inject(SETTINGS) private readonly settings: Pick<ConfigSettings, 'TESSERA_LOCAL_LOGICAL_SESSION_TIMEOUT_MINUTES'>,
  ) {}

  async refresh(input: unknown): Promise<RefreshSessionsResult> {
    const request = parseWith(refreshSessionsRequestSchema, input, 'refreshSessions request');
    const expired = await this.dataSource.transaction(async (manager) => {
      await this.upsertUsed(manager, request);
      await this.removeEnded(manager, request);
      const answer = await this.answerExpired(manager, request);
      await this.recordReports(manager, request);
      return answer;
    });
    return { expired, timeoutMinutes: this.settings.TESSERA_LOCAL_LOGICAL_SESSION_TIMEOUT_MINUTES };
  }

  /** Which of `ids` the sessions table still holds; a shard reaps the records of the others. */
  async liveSessions(input: unknown): Promise<{ live: string[] }> {
    const { ids } = parseWith(liveSessionsRequestSchema, input, 'liveSessions request');
    return { live: (await this.store.partition(this.dataSource, ids)).present };
  }

  /** A page of sessions for the control plane. Throws `BAD_VALUE` for an lsid or cursor that is not a UUID. */
  async page(options: { first: number; after?: string; lsid?: string; node?: string }): Promise<SessionPage> {
    for (const [name, value] of [
      ['lsid', options.lsid],
      ['after', options.after],
    ] as const) {
      if (value !== undefined && !UUID.test(value)) {
        throw new TesseraError('BAD_VALUE', `${name} must be a session id (a UUID), got "${value}"`, { details: { [name]: value } });
      }
    }
    return this.store.page({ ...options, first: Math.min(Math.max(options.first, 1), MAX_PAGE) });
  }

  /**
   * Step 1. Expects nothing; leaves every used session in the table with a last use no older
   * than the node's, the node's rows for exactly the sessions it caches or used, and a
   * `session.started` row naming the sessions this refresh inserted.
   */
  async upsertUsed(manager: EntityManager, request: Refresh): Promise<void> {
    const uses = mergeUsedSessions(request.used);
    const started = await this.store.upsertSessions(manager, uses);
    await this.store.upsertSessionNodes(manager, request.node, request.role, uses);
    await this.store.forgetUncached(manager, request.node, [...new Set([...request.cached, ...uses.map((u) => u.id)])]);
    await this.record(manager, sessionChangelogEntries('session.started', started, this.nodeOf(request), this.shardOf(request)));
  }

  /** Step 2. Leaves none of the node's ended sessions in the table, and a `session.ended` row naming those that were. */
  async removeEnded(manager: EntityManager, request: Refresh): Promise<void> {
    const ended = await this.store.remove(manager, request.ended);
    await this.record(manager, sessionChangelogEntries('session.ended', ended, this.nodeOf(request), this.shardOf(request)));
  }

  /** Step 3. Answers the node's cached sessions that the table no longer holds; changes nothing. */
  async answerExpired(manager: EntityManager, request: Refresh): Promise<string[]> {
    return (await this.store.partition(manager, request.cached)).absent;
  }

  /** Step 4. Records `session.reaped` (a shard's reaped sessions) and `session.retryAnswered` (`sessions: [{id, count}]`). */
  async recordReports(manager: EntityManager, request: Refresh): Promise<void> {
    const node = this.nodeOf(request);
    await this.record(manager, sessionChangelogEntries('session.reaped', request.reaped, node, this.shardOf(request)));
    await this.record(
      manager,
      sessionChangelogEntries('session.retryAnswered', request.retriesAnswered, node, { ...this.shardOf(request), key: 'sessions' }),
    );
  }

  private nodeOf(request: Refresh): Record<string, unknown> {
    return { node: request.node, role: request.role };
  }

  /** A shard's rows name it as their shard, as its other reports do. */
  private shardOf(request: Refresh): { shard?: string } {
    return request.role === 'shard' ? { shard: request.node } : {};
  }

  private async record(manager: EntityManager, entries: ReturnType<typeof sessionChangelogEntries>): Promise<void> {
    for (const entry of entries) await this.changelog.record(manager, entry);
  }
}
