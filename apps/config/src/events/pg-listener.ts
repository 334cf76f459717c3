import pg from 'pg';
import type { Logger } from 'pino';

const RECONNECT_DELAY_MS = 1_000;

/** What a listener tells its owner: each notification's payload, and each return after a lost connection. */
export interface PgListenerHandlers {
  notified(payload: string): void;
  /** Called once listening again: what was announced while the connection was down is the owner's to read. */
  reconnected(): void;
}

/**
 * A dedicated Postgres connection that LISTENs on one channel, and listens again a second after
 * it is lost, for as long as it takes. Notifications arrive in commit order while connected;
 * none arrive while it is not, which `reconnected` tells the owner.
 */
export class PgListener {
  private client: pg.Client | undefined;
  private closed = false;
  private reconnect: NodeJS.Timeout | undefined;

  constructor(
    private readonly url: string,
    private readonly channel: string,
    /** The connection's name in pg_stat_activity. */
    private readonly applicationName: string,
    private readonly handlers: PgListenerHandlers,
    private readonly logger: Logger,
  ) {}

  start(): Promise<void> {
    return this.connect();
  }

  async stop(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnect);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, application_name: this.applicationName });
    client.on('notification', (message) => {
      if (message.channel === this.channel && message.payload !== undefined) this.handlers.notified(message.payload);
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    await client.connect();
    await client.query(`LISTEN ${this.channel}`);
    this.client = client;
  }

  private lost(client: pg.Client, error: Error): void {
    if (this.closed || this.client !== client) return;
    this.client = undefined;
    this.logger.warn({ err: error }, `${this.channel} listener connection lost (${error.message}); reconnecting`);
    client.end().catch(() => undefined);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    this.reconnect = setTimeout(() => {
      this.connect().then(
        () => this.handlers.reconnected(),
        (error: unknown) => {
          this.logger.warn({ err: error }, `${this.channel} listener could not reconnect; retrying`);
          this.scheduleReconnect();
        },
      );
    }, RECONNECT_DELAY_MS);
    this.reconnect.unref();
  }
}
