import { Injectable } from '@nestjs/common';
import { type MigrationClient, type ShardClient, sessionHistoryBatchSchema } from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { SessionRecords } from '../sessions/session-records.service.js';

/** Sessions asked for per `sessionHistory` page. */
const SESSIONS_BATCH = 1_000;

/**
 * The recipient's side of session migration (MongoDB's SessionCatalogMigrationDestination): pulls
 * the retry history of the incoming range (or, for movePrimary, collection) from the donor, a page of sessions at a time, and
 * applies each page in one transaction, so that a session's record and image land together or
 * not at all, with the page's sessions checked out (SessionRecords). Applying is idempotent
 * (see `TransactionsStore.applyMigratedSessions`), which is what lets the recipient pull the
 * whole history again inside the critical section.
 */
@Injectable()
export class IncomingSessionHistory {
  constructor(private readonly records: SessionRecords) {}

  /**
   * Pulls and applies the history of migration `migrationId` of the collection `collectionUuid`
   * until a page comes back short; answers how many sessions took the migrated history.
   * `checkStopped` runs before each page, so that a stopped receipt stops pulling.
   */
  receive(donor: MigrationClient, migrationId: string, collectionUuid: string, checkStopped: () => void): Promise<number> {
    return this.pull((page) => donor.sessionHistory({ migrationId, ...page }), collectionUuid, checkStopped);
  }

  /**
   * The same for a whole collection, from the donor of a movePrimary (`collectionSessionHistory`
   * of `ns`): every statement of the collection's sessions comes along.
   */
  receiveCollection(donor: ShardClient, ns: string, collectionUuid: string): Promise<number> {
    return this.pull(
      (page) => donor.collectionSessionHistory(ns, page),
      collectionUuid,
      () => undefined,
    );
  }

  private async pull(
    fetchPage: (page: { limit: number; afterLsid?: string }) => Promise<unknown>,
    collectionUuid: string,
    checkStopped: () => void,
  ): Promise<number> {
    let taken = 0;
    let afterLsid: string | undefined;
    for (;;) {
      checkStopped();
      const answer = await fetchPage({ limit: SESSIONS_BATCH, ...(afterLsid ? { afterLsid } : {}) });
      const { sessions } = parseWith(sessionHistoryBatchSchema, answer, 'sessionHistory batch');
      if (sessions.length > 0) {
        taken += await this.records.applyMigrated(collectionUuid, sessions);
        afterLsid = sessions[sessions.length - 1]!.lsid;
      }
      if (sessions.length < SESSIONS_BATCH) return taken;
    }
  }
}
