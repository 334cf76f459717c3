import { Injectable, type OnModuleInit } from '@nestjs/common';
import type { DropResult } from '@tessera/protocol';
import { databaseLock, databaseOf } from '../catalog/namespace.js';
import { CollectionDropper } from './collection-dropper.js';
import type { PhaseContext } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';

/** The coordinator document's state (`ddl_coordinators.state`): whether the collection existed. */
export interface DropCollectionState {
  found: boolean;
}

/** The phases; their names are persisted in `ddl_coordinators.phase` and name failpoints. */
const PHASES = ['drop'] as const;

/**
 * dropCollection as a coordinator (MongoDB's DropCollectionCoordinator), under the database and
 * collection locks. Its one phase is `CollectionDropper`'s, which dropDatabase shares; it is
 * idempotent, so a resumed coordinator repeats it.
 */
@Injectable()
export class DropCollectionCoordinator implements OnModuleInit {
  constructor(
    private readonly coordinators: DdlCoordinatorService,
    private readonly dropper: CollectionDropper,
  ) {}

  onModuleInit(): void {
    this.coordinators.define<{ ns: string }, DropCollectionState, DropResult>({
      kind: 'dropCollection',
      phases: PHASES,
      resources: (request) => [databaseLock(databaseOf(request.ns)), request.ns],
      initialState: () => ({ found: false }),
      runPhase: (_phase, context) => this.drop(context),
      result: (state) => ({ dropped: state.found }),
    });
  }

  /**
   * Expects: nothing. Stops migrations, drops the collection's table on every shard and then
   * forgets it in the catalog. Leaves: `found`, whether this or an earlier run found it.
   */
  private async drop({
    request,
    state,
    inFencedTransaction,
  }: PhaseContext<{ ns: string }, DropCollectionState>): Promise<DropCollectionState> {
    return { found: (await this.dropper.dropCollectionLocked(request.ns, inFencedTransaction)) || state.found };
  }
}
