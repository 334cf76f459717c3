import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { Failpoints, LOGGER, isTransientDatabaseError } from '@tessera/platform';
import { DistLockService } from '../locks/dist-lock.service.js';
import { type LeaderOnlyService, LeaderService } from '../leader/leader.service.js';
import type { CoordinatorDefinition, PhaseContext } from './ddl-coordinator.js';
import { type CoordinatorRow, DONE, DdlCoordinatorStore } from './ddl-coordinator.store.js';

const MAX_BACKOFF_MS = 5_000;

/** The coordinator lost its term to a newer leader: stop quietly, the new leader owns it. */
class FencedError extends Error {}

/**
 * Runs DDL coordinators on the leader: one per resource at a time (a second identical request
 * joins the running one; a different one is refused with `CONFLICTING_OPERATION`), under
 * distributed locks, phase by phase with the phase persisted first. Retryable errors retry the
 * phase with backoff for as long as this process leads; other errors fail the operation and
 * release its locks. On election, unfinished coordinators are resumed.
 */
@Injectable()
export class DdlCoordinatorService implements LeaderOnlyService, OnModuleInit {
  readonly name = 'ddl-coordinators';
  /** The wait before a phase's first retry; it doubles with every further attempt, up to MAX_BACKOFF_MS. */
  protected readonly retryBackoffMs: number = 200;
  private readonly definitions = new Map<string, CoordinatorDefinition<unknown, unknown, unknown>>();
  private readonly running = new Map<string, Promise<unknown>>();
  private term: number | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly store: DdlCoordinatorStore,
    private readonly leader: LeaderService,
    private readonly locks: DistLockService,
    private readonly failpoints: Failpoints,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    this.leader.register(this);
  }

  /** Makes a kind of coordinator known, so it can be started and resumed. */
  define<Request, State, Result>(definition: CoordinatorDefinition<Request, State, Result>): void {
    this.definitions.set(definition.kind, definition as CoordinatorDefinition<unknown, unknown, unknown>);
  }

  async startAsLeader(term: number): Promise<void> {
    this.term = term;
    for (const row of await this.store.unfinished()) {
      this.logger.info({ id: row.id, kind: row.kind, phase: row.phase }, `resuming ${row.kind} of ${row.resource} at phase ${row.phase}`);
      // Failures are logged and recorded by drive(); joiners see them through `running`.
      this.driveOnce(row.id, term).catch(() => undefined);
    }
  }

  async stopAsLeader(): Promise<void> {
    this.term = undefined;
  }

  /**
   * Starts (or joins) the coordinator of `kind` for `request` and resolves with its result.
   * Throws `NOT_LEADER` off the leader, `CONFLICTING_OPERATION` if another DDL runs on the
   * same resource, or the error that failed the operation.
   */
  async run<Request, Result>(kind: string, request: Request): Promise<Result> {
    const term = await this.leader.assertLeader();
    if (this.term !== term) {
      throw new TesseraError('NOT_LEADER', 'this config server is taking over as leader and resuming DDL operations; retry shortly', {
        details: { leader: null },
      });
    }
    const definition = this.definition(kind);
    const resource = definition.resources(request).at(-1)!;
    for (;;) {
      const row = await this.store.runningOn(resource);
      if (row !== undefined) {
        if (row.kind === kind && isDeepStrictEqual(row.request, JSON.parse(JSON.stringify(request)))) {
          return (await this.driveOnce(row.id, term)) as Result;
        }
        throw new TesseraError(
          'CONFLICTING_OPERATION',
          `${row.kind} of ${row.resource} is in progress (phase ${row.phase}); retry when it has finished`,
          {
            details: { running: { id: row.id, kind: row.kind, phase: row.phase } },
          },
        );
      }
      const id = randomUUID();
      const phase = definition.phases[0]!;
      const inserted = await this.store.insert({ id, kind, resource, phase, request, state: definition.initialState(request), term });
      if (inserted) return (await this.driveOnce(id, term)) as Result;
      // Lost a race with an identical or conflicting request: look again.
    }
  }

  /**
   * Drives a coordinator unless this process already does: registration is synchronous, so two
   * requests (or a request and the election's resumption) can never drive one coordinator twice.
   */
  private driveOnce(id: string, term: number): Promise<unknown> {
    const running = this.running.get(id);
    if (running !== undefined) return running;
    const promise = this.drive(id, term);
    this.running.set(id, promise);
    const forget = () => {
      if (this.running.get(id) === promise) this.running.delete(id);
    };
    promise.then(forget, forget);
    return promise;
  }

  private definition(kind: string): CoordinatorDefinition<unknown, unknown, unknown> {
    const definition = this.definitions.get(kind);
    if (definition === undefined) throw new TesseraError('INTERNAL', `no DDL coordinator of kind ${kind}`);
    return definition;
  }

  private async drive(id: string, term: number): Promise<unknown> {
    const row = await this.store.claim(id, term);
    if (row === undefined) throw new TesseraError('NOT_LEADER', 'a newer leader owns this DDL operation');
    const locks = [];
    // The state of the last phase that ended: what a failure's cleanup has to undo.
    let state = row.state;
    try {
      const definition = this.definition(row.kind);
      for (const resource of definition.resources(row.request)) {
        locks.push(await this.locks.acquire(resource, id, `${row.kind} ${row.resource}`));
      }
      for (let index = definition.phases.indexOf(row.phase); index < definition.phases.length; index++) {
        const phase = definition.phases[index]!;
        await this.checkpoint(id, term, phase, state);
        state = await this.runPhaseWithRetries(definition, { id, row, phase, state, term });
      }
      await this.checkpoint(id, term, DONE, state);
      this.logger.info({ id, kind: row.kind, resource: row.resource }, `${row.kind} of ${row.resource} done`);
      return definition.result(state, row.request);
    } catch (error) {
      if (error instanceof FencedError) {
        throw new TesseraError('NOT_LEADER', `${row.kind} of ${row.resource} was taken over by a newer leader`, { details: { id } });
      }
      await this.definitions
        .get(row.kind)
        ?.onFailure?.(row.request, state)
        .catch((cleanup: unknown) =>
          this.logger.error({ id, err: cleanup }, `${row.kind} of ${row.resource}: cleanup after failure failed`),
        );
      const envelope = error instanceof TesseraError ? error.toEnvelope() : { code: 'INTERNAL', message: (error as Error).message };
      await this.store.fail(id, term, envelope);
      this.logger.warn({ id, kind: row.kind, err: error }, `${row.kind} of ${row.resource} failed: ${(error as Error).message}`);
      throw error;
    } finally {
      for (const lock of locks.reverse()) await lock.release().catch(() => undefined);
    }
  }

  private async runPhaseWithRetries(
    definition: CoordinatorDefinition<unknown, unknown, unknown>,
    run: { id: string; row: CoordinatorRow; phase: string; state: unknown; term: number },
  ): Promise<unknown> {
    await this.failpoints.pauseAt(`ddl.${run.row.kind}.${run.phase}`, run.row.resource);
    const context: PhaseContext<unknown, unknown> = {
      id: run.id,
      request: run.row.request,
      state: run.state,
      inFencedTransaction: (work) =>
        this.dataSource.transaction((manager) => this.fenced(manager, run.id, run.term).then(() => work(manager))),
    };
    for (let attempt = 1; ; attempt++) {
      if (this.term !== run.term) throw new FencedError();
      try {
        return await definition.runPhase(run.phase, context);
      } catch (error) {
        // Retryable errors and transient database failures (a lost connection, a deadlock victim)
        // retry the phase: failing here could leave a destructive phase half-done.
        const retryable = error instanceof TesseraError ? error.retryable : isTransientDatabaseError(error);
        if (!retryable) throw error;
        const delay = Math.min(MAX_BACKOFF_MS, this.retryBackoffMs * 2 ** (attempt - 1));
        this.logger.warn(
          { id: run.id, phase: run.phase, attempt, err: error },
          `${run.row.kind} phase ${run.phase} will retry in ${delay} ms: ${(error as Error).message}`,
        );
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** The coordinator still belongs to this term, and this process still holds the lease of that term. */
  private async fenced(manager: EntityManager, id: string, term: number): Promise<void> {
    if (!(await this.store.isOwned(manager, id, term, this.leader.id))) throw new FencedError();
  }

  /** Persists the phase about to run and its state, while this term owns the coordinator. */
  private async checkpoint(id: string, term: number, phase: string, state: unknown): Promise<void> {
    if (!(await this.store.checkpoint(id, term, phase, state))) throw new FencedError();
  }
}
