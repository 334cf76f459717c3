import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import type { Observable } from 'rxjs';
import { DataSource } from 'typeorm';
import { LOGGER, SETTINGS } from '@tessera/platform';
import type { ClusterEvent } from '@tessera/protocol';
import type { ConfigSettings } from '../config.settings.js';
import { EventBus, type EventFilter, changelogRows } from './event-bus.js';

/** The process's `EventBus`, started with the app: what GraphQL subscriptions and the socket.io gateway read. */
@Injectable()
export class EventBusService implements OnModuleInit, OnApplicationShutdown {
  private readonly bus: EventBus;

  constructor(dataSource: DataSource, @Inject(SETTINGS) settings: ConfigSettings, @Inject(LOGGER) logger: Logger) {
    this.bus = new EventBus(
      settings.TESSERA_DATABASE_URL,
      changelogRows((sql, parameters) => dataSource.query(sql, parameters)),
      logger,
    );
  }

  get lastSeq(): number {
    return this.bus.lastSeq;
  }

  async onModuleInit(): Promise<void> {
    await this.bus.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.bus.stop();
  }

  stream(filter: EventFilter, since?: number): Observable<ClusterEvent> {
    return this.bus.stream(filter, since);
  }
}
