import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '@tessera/platform';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { MigrationCloner } from './migration-cloner.js';
import { type CriticalSectionHandle, MigrationCoordinator } from './migration-coordinator.js';
import { type CoordinatorDocument, MigrationCoordinatorStore } from './migration-coordinator.store.js';
import { MigrationRegistryStore } from './migration-registry.store.js';
import { MigrationReporter } from './migration-reporter.js';

/**
 * The donor's recovery after a restart (MongoDB's migration recovery on step-up): every
 * coordinator document found is finished by its decision, asking the config server when none
 * was recorded, and the config server is told, so its record of the migration goes; then the
 * leftovers of a crash before a coordinator document was written (registrations, capture
 * triggers) go.
 */
@Injectable()
export class MigrationRecovery implements OnApplicationBootstrap, OnApplicationShutdown {
  private recovery: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly coordinators: MigrationCoordinatorStore,
    private readonly registry: MigrationRegistryStore,
    private readonly runtime: ShardingRuntime,
    private readonly coordinator: MigrationCoordinator,
    private readonly cloner: MigrationCloner,
    private readonly reporter: MigrationReporter,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * Before the shard serves anything: a migration found without a decision may have committed
   * on the config server, so its collection stays in the critical section until recovery has
   * learnt the decisions of all the collection's migrations found (a donor serving several);
   * then every found migration is finished in the background.
   */
  async onApplicationBootstrap(): Promise<void> {
    const documents = await this.coordinators.all();
    const sections = new Map<string, CriticalSectionHandle>();
    for (const document of documents) {
      if (document.decision === undefined && !sections.has(document.ns)) {
        const section = await this.runtime.enterCriticalSection(document.ns, `recovery of migration ${document.id}`);
        section.blockReads();
        sections.set(document.ns, section);
      }
    }
    this.recovery = this.recover(documents, sections);
  }

  onApplicationShutdown(): void {
    this.stopped = true;
  }

  /** Settles when recovery is over (or failed); undefined before the shard has started it. */
  get done(): Promise<void> | undefined {
    return this.recovery;
  }

  private async recover(documents: CoordinatorDocument[], sections: Map<string, CriticalSectionHandle>): Promise<void> {
    try {
      for (const document of documents) {
        const decision = document.decision ?? (await this.coordinator.decisionFromConfig(document.id));
        this.logger.info(
          { migrationId: document.id, ns: document.ns, decision },
          `recovering migration ${document.id} of ${document.ns}: ${decision}`,
        );
        // A collection's section is held until its last migration found is finished: any of them
        // may be the one whose commit landed.
        const last = !documents.slice(documents.indexOf(document) + 1).some((d) => d.ns === document.ns);
        const section = last ? sections.get(document.ns) : undefined;
        if (last) sections.delete(document.ns);
        await this.coordinator.finish(document, decision, section, performance.now());
        this.reporter.report({ what: 'moveChunk.recovered', ns: document.ns, details: { migrationId: document.id, decision } });
        await this.coordinator.endOnConfig(document.id);
      }
      await this.registry.unregisterStrayDonors();
      await this.cloner.dropStrayCaptures();
    } catch (error) {
      if (!this.stopped) this.logger.error({ err: error }, `migration recovery failed: ${(error as Error).message}`);
    } finally {
      for (const section of sections.values()) section.release();
    }
  }
}
