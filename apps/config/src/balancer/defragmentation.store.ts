import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type DefragmentationState, startDefragmentation } from '@tessera/core';
import type { CollectionRow } from '../catalog/catalog-rows.js';
import { ChangelogService } from '../changelog/changelog.service.js';

/**
 * The defragmentation state of each collection being defragmented, shared by the balancer's
 * main loop (phase 2 migrations) and secondary loop (merges, data sizes). The pure machine's
 * state is kept in memory on the leader and written to `collections.defragmentation_state` on
 * every change, so a new leader resumes from the phase and sizes its predecessor reached (its
 * actions in flight and retries are not kept: the machine derives its work from the chunks, so
 * they are found again).
 * `configureCollectionBalancing(ns, { defragmentCollection })` sets the state to null, which
 * starts over from the first phase.
 */
@Injectable()
export class DefragmentationStore {
  private readonly states = new Map<string, DefragmentationState>();
  /** Writes per collection, in order, so an older state never lands after a newer one. */
  private readonly writes = new Map<string, Promise<void>>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly changelog: ChangelogService,
  ) {}

  /** Forgets every state in memory (on a change of leader). */
  reset(): void {
    this.states.clear();
  }

  /**
   * Makes sure `row`'s defragmentation (which must be on) has a state in memory, starting or
   * resuming it, and answers it. A caller that changes the state reads it again with `current`
   * and saves the change with no await in between, since both loops and the actions' outcomes
   * change it: a state held across an await would drop their changes (an action left in flight
   * forever stops the machine).
   */
  async load(row: CollectionRow): Promise<DefragmentationState> {
    const stored = row.defragmentation_state as PersistedState | null;
    const inMemory = this.states.get(row.ns);
    if (stored === null && inMemory !== undefined) {
      // The row may have been read before this process wrote the state it holds: read it again
      // after the pending writes. Still null: the user restarted defragmentation since.
      await this.writes.get(row.ns)?.catch(() => undefined);
      const again: Array<{ state: unknown }> = await this.dataSource.query(
        'SELECT defragmentation_state AS state FROM collections WHERE ns = $1',
        [row.ns],
      );
      const current = this.states.get(row.ns);
      if (again[0]?.state !== null && again[0]?.state !== undefined && current !== undefined) return current;
    }
    if (stored === null) {
      // Never started, or restarted by the user since.
      const fresh = startDefragmentation(row.ns);
      await this.save(fresh);
      await this.changelog.record(this.dataSource.manager, {
        what: 'balancer.defragmentation',
        ns: row.ns,
        details: { phase: fresh.phase },
      });
      return fresh;
    }
    if (inMemory !== undefined) return inMemory;
    const resumed: DefragmentationState = { ...startDefragmentation(row.ns), ...(stored as PersistedState) };
    this.states.set(row.ns, resumed);
    return resumed;
  }

  /** The state in memory of `ns`, if it is being defragmented by this leader. */
  current(ns: string): DefragmentationState | undefined {
    return this.states.get(ns);
  }

  /** Keeps `state` and writes it; a change of phase is a changelog row, and `finished` ends the collection's defragmentation. */
  async save(state: DefragmentationState): Promise<void> {
    const before = this.states.get(state.namespace);
    this.states.set(state.namespace, state);
    const finished = state.phase === 'finished';
    if (finished) this.states.delete(state.namespace);
    const previous = this.writes.get(state.namespace) ?? Promise.resolve();
    const write = previous
      .catch(() => undefined)
      .then(async () => {
        if (finished) {
          await this.dataSource.transaction(async (manager) => {
            const ended: unknown[] = await manager.query(
              'UPDATE collections SET defragment_collection = false, defragmentation_state = NULL WHERE ns = $1 AND defragment_collection RETURNING ns',
              [state.namespace],
            );
            // Already ended (a stale read resumed it): one row says it finished.
            if (ended.length === 0) return;
            await this.changelog.record(manager, {
              what: 'balancer.defragmentation',
              ns: state.namespace,
              details: {
                phase: 'finished',
                restarts: state.restarts,
                ...(state.lastError === undefined ? {} : { lastError: state.lastError }),
              },
            });
          });
          return;
        }
        await this.dataSource.query('UPDATE collections SET defragmentation_state = $2 WHERE ns = $1 AND defragment_collection', [
          state.namespace,
          JSON.stringify(persisted(state)),
        ]);
        if (before !== undefined && before.phase !== state.phase) {
          await this.changelog.record(this.dataSource.manager, {
            what: 'balancer.defragmentation',
            ns: state.namespace,
            details: {
              phase: state.phase,
              restarts: state.restarts,
              ...(state.lastError === undefined ? {} : { lastError: state.lastError }),
            },
          });
        }
      });
    this.writes.set(state.namespace, write);
    await write;
  }
}

/** What is written of a state: plain JSON, no shard keys (the sizes are keyed by the range's text). */
type PersistedState = Pick<DefragmentationState, 'phase' | 'estimates' | 'restarts' | 'lastError'>;

function persisted(state: DefragmentationState): PersistedState {
  return {
    phase: state.phase,
    estimates: state.estimates,
    restarts: state.restarts,
    ...(state.lastError === undefined ? {} : { lastError: state.lastError }),
  };
}
