import type { Logger } from 'pino';
import { Observable, Subject } from 'rxjs';
import type { ClusterEvent } from '@tessera/protocol';
import { type ChangelogRow, eventOfRow } from '../changelog/changelog.service.js';
import { PgListener } from './pg-listener.js';

/** The NOTIFY channel the changelog trigger publishes on. */
export const EVENTS_CHANNEL = 'tessera_events';
/** How many recent events each process keeps in memory, so most resumes do not read the database. */
const RECENT_EVENTS = 10_000;
/** Rows per read when replaying from the database. */
const REPLAY_PAGE = 500;

/** Reads committed changelog rows by seq; the database side of the bus, replaceable in tests. */
export interface ChangelogRows {
  /** Rows with `seq` in `(after, upTo]` (no upper bound when `upTo` is undefined), by seq, at most `limit`. */
  after(after: number, limit: number, upTo?: number): Promise<ChangelogRow[]>;
  byId(id: string): Promise<ChangelogRow | undefined>;
  /** The highest committed seq (0 when the changelog is empty). */
  lastSeq(): Promise<number>;
}

export type EventFilter = (event: ClusterEvent) => boolean;

/**
 * One config process's view of the cluster's event stream. A dedicated Postgres connection
 * LISTENs on `tessera_events`; notifications are handled one at a time in arrival order, which
 * is commit order, which is `seq` order. A notification past a hole (a reconnect, a payload too
 * big for NOTIFY) reads the missing rows first, so `live` emits every event exactly once, by
 * increasing seq. `stream(since)` replays from memory or the database, then continues live,
 * with no gap and no duplicate at the seam.
 */
export class EventBus {
  private readonly live = new Subject<ClusterEvent>();
  private readonly recent: ClusterEvent[] = [];
  private readonly listener: PgListener;
  private queue: Promise<void> = Promise.resolve();
  /** The highest seq emitted on `live` (everything at or below it has been handled). */
  private delivered = 0;

  constructor(
    url: string,
    private readonly rows: ChangelogRows,
    private readonly logger: Logger,
  ) {
    this.listener = new PgListener(
      url,
      EVENTS_CHANNEL,
      'tessera-events',
      {
        notified: (payload) => this.enqueue(() => this.handle(payload)),
        // Whatever committed while the connection was down is read from the table.
        reconnected: () => this.enqueue(() => this.catchUp()),
      },
      logger,
    );
  }

  get lastSeq(): number {
    return this.delivered;
  }

  /** LISTENs, then starts from the highest committed seq: earlier events are history, read on demand. */
  async start(): Promise<void> {
    // Notifications that arrive before the starting point is known wait behind it.
    let ready!: () => void;
    this.queue = new Promise<void>((resolve) => (ready = resolve));
    try {
      await this.listener.start();
      this.delivered = await this.rows.lastSeq();
    } finally {
      ready();
    }
  }

  async stop(): Promise<void> {
    await this.listener.stop();
    await this.queue;
    this.live.complete();
  }

  /**
   * Events matching `filter`, in seq order: those after `since` first (when given), then live
   * ones. Without `since` the stream starts with the next event.
   */
  stream(filter: EventFilter, since?: number): Observable<ClusterEvent> {
    return new Observable<ClusterEvent>((subscriber) => {
      let last = since ?? this.delivered;
      let buffered: ClusterEvent[] | undefined = since === undefined ? undefined : [];
      const emit = (event: ClusterEvent) => {
        if (event.seq <= last) return;
        last = event.seq;
        if (filter(event)) subscriber.next(event);
      };
      const subscription = this.live.subscribe({
        next: (event) => (buffered === undefined ? emit(event) : buffered.push(event)),
        complete: () => subscriber.complete(),
      });
      if (buffered !== undefined) {
        this.replay(last, emit, () => subscriber.closed).then(
          () => {
            const pending = buffered ?? [];
            buffered = undefined;
            for (const event of pending) emit(event);
          },
          (error: unknown) => subscriber.error(error),
        );
      }
      return () => subscription.unsubscribe();
    });
  }

  /** Events after `since` up to the last delivered one: from memory when it reaches back far enough, else from the database. */
  async history(since: number, filter: EventFilter, limit: number): Promise<ClusterEvent[]> {
    const found: ClusterEvent[] = [];
    await this.replay(
      since,
      (event) => {
        if (found.length < limit && filter(event)) found.push(event);
      },
      () => found.length >= limit,
      this.delivered,
    );
    return found;
  }

  private async replay(since: number, emit: (event: ClusterEvent) => void, stop: () => boolean, upTo?: number): Promise<void> {
    let after = since;
    const oldest = this.recent[0];
    if (oldest === undefined || oldest.seq > after + 1) {
      // Before what memory holds: page through the database up to where memory starts.
      const memoryStart = oldest === undefined ? undefined : oldest.seq - 1;
      const until = upTo === undefined ? memoryStart : Math.min(upTo, memoryStart ?? upTo);
      for (;;) {
        if (stop()) return;
        const rows = await this.rows.after(after, REPLAY_PAGE, until);
        for (const row of rows) emit(eventOfRow(row));
        if (rows.length > 0) after = Number(rows[rows.length - 1]!.seq);
        if (rows.length < REPLAY_PAGE) break;
      }
    }
    // The rest is in memory (synchronously, so nothing is delivered in between).
    for (const event of this.recent) {
      if (stop()) return;
      if (event.seq > after && (upTo === undefined || event.seq <= upTo)) emit(event);
    }
  }

  private enqueue(work: () => Promise<void>): void {
    this.queue = this.queue.then(work).catch((error: unknown) => this.logger.error({ err: error }, 'event delivery failed'));
  }

  private async handle(payload: string): Promise<void> {
    const notified = JSON.parse(payload) as ChangelogRow & { truncated?: boolean };
    const seq = Number(notified.seq);
    if (seq <= this.delivered) return;
    // A hole before it: rows that committed while this process was not listening.
    if (seq > this.delivered + 1) await this.catchUp(seq - 1);
    let row: ChangelogRow | undefined = notified;
    if (notified.truncated === true) row = await this.rows.byId(String(notified.id));
    if (row === undefined) return;
    this.deliver(eventOfRow({ ...row, seq }));
  }

  /** Delivers committed rows after the last delivered one (up to `upTo`). A seq never seen was never committed. */
  private async catchUp(upTo?: number): Promise<void> {
    for (;;) {
      const rows = await this.rows.after(this.delivered, REPLAY_PAGE, upTo);
      for (const row of rows) this.deliver(eventOfRow(row));
      if (rows.length < REPLAY_PAGE) return;
    }
  }

  private deliver(event: ClusterEvent): void {
    if (event.seq <= this.delivered) return;
    this.delivered = event.seq;
    this.recent.push(event);
    if (this.recent.length > RECENT_EVENTS) this.recent.splice(0, this.recent.length - RECENT_EVENTS);
    this.live.next(event);
  }
}

/** The database side of the bus on a query function (a TypeORM DataSource's `query`). */
export function changelogRows(query: (sql: string, parameters?: unknown[]) => Promise<ChangelogRow[]>): ChangelogRows {
  return {
    after: (after, limit, upTo) =>
      upTo === undefined
        ? query('SELECT * FROM changelog WHERE seq > $1 ORDER BY seq LIMIT $2', [after, limit])
        : query('SELECT * FROM changelog WHERE seq > $1 AND seq <= $3 ORDER BY seq LIMIT $2', [after, limit, upTo]),
    byId: async (id) => (await query('SELECT * FROM changelog WHERE id = $1', [id]))[0],
    lastSeq: async () => {
      const rows = (await query('SELECT coalesce(max(seq), 0) AS seq FROM changelog')) as unknown as Array<{ seq: string }>;
      return Number(rows[0]?.seq ?? 0);
    },
  };
}
