import { Injectable } from '@nestjs/common';
import { TesseraError, chunkRangeToString } from '@tessera/core';
import {
  type DonorMoveRangeRequest,
  type MoveRangeResult,
  type ShardMigrationStatus,
  chunkRangeFromWire,
  donorMoveRangeRequestSchema,
} from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { MigrationRecovery } from './migration-recovery.js';
import { MigrationRegistryStore } from './migration-registry.store.js';
import { MigrationSourceManager } from './migration-source-manager.js';
import { RangeDeleterService } from './range-deleter.service.js';

/**
 * What the config server asks a donor: `moveRange` runs a migration this shard donates (see
 * MigrationSourceManager for its phases), one at a time; `status` says which migration this
 * shard takes part in.
 */
@Injectable()
export class MigrationSourceService {
  private running: { key: string; request: DonorMoveRangeRequest; result: Promise<MoveRangeResult>; since: string } | undefined;

  constructor(
    private readonly manager: MigrationSourceManager,
    private readonly recovery: MigrationRecovery,
    private readonly registry: MigrationRegistryStore,
    private readonly rangeDeleter: RangeDeleterService,
  ) {}

  /**
   * Runs a migration this shard donates, to its end; the same migration asked again (the config
   * server retrying) joins the running one. Throws `CONFLICTING_OPERATION` while another runs.
   */
  moveRange(input: DonorMoveRangeRequest): Promise<MoveRangeResult> {
    const request = parseWith(donorMoveRangeRequestSchema, input, 'moveRange request');
    const key = JSON.stringify([request.ns, request.range, request.recipient]);
    if (this.running !== undefined) {
      if (this.running.key === key) return this.running.result;
      const r = this.running.request;
      throw new TesseraError(
        'CONFLICTING_OPERATION',
        `this shard is already donating ${chunkRangeToString(chunkRangeFromWire(r.range))} of ${r.ns} to ${r.recipient}; a shard takes part in one migration at a time`,
        { details: { active: { migrationId: r.migrationId, ns: r.ns, recipient: r.recipient } } },
      );
    }
    const result = this.donate(request).finally(() => {
      if (this.running?.result === result) this.running = undefined;
    });
    this.running = { key, request, result, since: new Date().toISOString() };
    return result;
  }

  /**
   * The migration this shard takes part in: the registered one, else one it was asked to donate
   * and is still checking before it registers (the config server must not take it for gone).
   */
  async status(): Promise<ShardMigrationStatus> {
    const registered = await this.registry.registered();
    const starting = this.running;
    const active =
      registered !== undefined
        ? {
            migrationId: registered.migrationId,
            role: registered.role,
            ns: registered.ns,
            otherShard: registered.otherShard,
            since: registered.since,
          }
        : starting !== undefined
          ? {
              migrationId: starting.request.migrationId,
              role: 'donor' as const,
              ns: starting.request.ns,
              otherShard: starting.request.recipient,
              since: starting.since,
            }
          : null;
    return { active, rangeDeletionsPending: await this.rangeDeleter.pendingCount() };
  }

  /** The migration, then, with `waitForDelete`, the deletion of the donated range here. */
  private async donate(request: DonorMoveRangeRequest): Promise<MoveRangeResult> {
    const result = await this.manager.run(request, this.recovery.done);
    if (request.waitForDelete) await this.rangeDeleter.waitForTask(request.migrationId);
    return result;
  }
}
