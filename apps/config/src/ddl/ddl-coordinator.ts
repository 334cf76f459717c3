import type { EntityManager } from 'typeorm';

/**
 * A DDL operation as a persisted state machine (sharding-internals.md, "Sharding DDL
 * Coordinator"): an ordered list of idempotent phases. The coordinator service writes the
 * phase to the coordinator's state document before running it, so a new leader resumes from
 * the last phase reached and runs it again; every phase must therefore be safe to repeat.
 */
export interface CoordinatorDefinition<Request, State, Result> {
  readonly kind: string;
  readonly phases: readonly string[];
  /** Resources to lock, in order (database, then collection), for the whole operation. */
  resources(request: Request): string[];
  initialState(request: Request): State;
  /** Runs one phase and returns the state to persist with the next phase. */
  runPhase(phase: string, context: PhaseContext<Request, State>): Promise<State>;
  result(state: State, request: Request): Result;
  /** Undoes what must not outlive a failed operation (e.g. a migration block); best effort. */
  onFailure?(request: Request, state: State): Promise<void>;
}

export interface PhaseContext<Request, State> {
  readonly id: string;
  readonly request: Request;
  readonly state: State;
  /**
   * Runs `work` in a transaction that first checks this coordinator still belongs to the
   * current leader term (fencing off a deposed leader), so catalog writes and the check commit
   * together.
   */
  inFencedTransaction: FencedTransaction;
}

/** Runs work in a transaction that commits only if the coordinator still belongs to this leader term. */
export type FencedTransaction = <T>(work: (manager: EntityManager) => Promise<T>) => Promise<T>;
