import { Injectable } from '@nestjs/common';
import {
  type DonorMoveRangeRequest,
  type MoveRangeResult,
  type ShardMigrationStatus,
  donorMoveRangeRequestSchema,
} from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { MigrationRecovery } from './migration-recovery.js';
import { MigrationRegistryStore } from './migration-registry.store.js';
import { MigrationSourceManager } from './migration-source-manager.js';
import { RangeDeleterService } from './range-deleter.service.js';

/** A donation asked for, from the request until it ends. */
interface RunningDonation {
  request: DonorMoveRangeRequest;
  result: Promise<MoveRangeResult>;
  since: string;
}

/**
 * What the config server asks a donor: `moveRange` runs a migration this shard donates (see
 * MigrationSourceManager for its phases), several at once when the registry allows it;
 * `status` says which migrations this shard takes part in.
 */
@Injectable()
export class MigrationSourceService {
  /** The donations asked for and not ended, by namespace, range and recipient. */
  private readonly running = new Map<string, RunningDonation>();

  constructor(
    private readonly manager: MigrationSourceManager,
    private readonly recovery: MigrationRecovery,
    private readonly registry: MigrationRegistryStore,
    private readonly rangeDeleter: RangeDeleterService,
  ) {}

  /**
   * Runs a migration this shard donates, to its end; the same migration asked again (the config
   * server retrying) joins the running one. The registry refuses one that may not run beside
   * those under way (`CONFLICTING_OPERATION`, see MigrationRegistryStore).
   */
  moveRange(input: DonorMoveRangeRequest): Promise<MoveRangeResult> {
    const request = parseWith(donorMoveRangeRequestSchema, input, 'moveRange request');
    const key = JSON.stringify([request.ns, request.range, request.recipient]);
    const joined = this.running.get(key);
    if (joined !== undefined) return joined.result;
    const result = this.donate(request).finally(() => {
      if (this.running.get(key)?.result === result) this.running.delete(key);
    });
    this.running.set(key, { request, result, since: new Date().toISOString() });
    return result;
  }

  /**
   * The migrations this shard takes part in: the registered ones, then those it was asked to
   * donate and is still checking before it registers them (the config server must not take
   * them for gone).
   */
  async status(): Promise<ShardMigrationStatus> {
    const registered = await this.registry.registered();
    const ids = new Set(registered.map((r) => r.migrationId));
    const starting = [...this.running.values()].filter((d) => !ids.has(d.request.migrationId));
    return {
      migrations: [
        ...registered.map((r) => ({ migrationId: r.migrationId, role: r.role, ns: r.ns, otherShard: r.otherShard, since: r.since })),
        ...starting.map((d) => ({
          migrationId: d.request.migrationId,
          role: 'donor' as const,
          ns: d.request.ns,
          otherShard: d.request.recipient,
          since: d.since,
        })),
      ],
      rangeDeletionsPending: await this.rangeDeleter.pendingCount(),
    };
  }

  /** The migration, then, with `waitForDelete`, the deletion of the donated range here. */
  private async donate(request: DonorMoveRangeRequest): Promise<MoveRangeResult> {
    const result = await this.manager.run(request, this.recovery.done);
    if (request.waitForDelete) await this.rangeDeleter.waitForTask(request.migrationId);
    return result;
  }
}
