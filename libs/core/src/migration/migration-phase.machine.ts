/**
 * The phases of a migration on each side, as explicit state machines (MongoDB's
 * MigrationSourceManager and MigrationDestinationManager states). The donor reports each phase
 * it enters as a `moveChunk.phase` changelog row under these names, so they are part of the
 * public record and must not be renamed.
 *
 * Donor:
 *
 *     checkingPreconditions -> registered -> cloning -> steady -> criticalSection
 *       -> recipientCommitted -> committed -> released -> rangeDeletionScheduled
 *
 * and every phase before `committed` may go to `aborted`. A commit whose outcome is unknown
 * leaves the donor in `recipientCommitted`: recovery learns the decision from the config server.
 *
 * Recipient (the state `recvChunkStatus` answers):
 *
 *     waitingForRangeDeletion -> cloning -> catchup -> steady -> committing -> done
 *
 * and every state before `done` may go to `failed`.
 */
import { TesseraError } from '../errors.js';

/** A closed set of phases and the moves allowed between them. */
export interface PhaseMachine<P extends string> {
  readonly name: string;
  readonly initial: P;
  readonly phases: readonly P[];
  /** Whether a side in `from` may move to `to`. */
  canMove(from: P, to: P): boolean;
  /** Answers `to`; throws `INTERNAL` when the move is not allowed (a bug, never an input error). */
  move(from: P, to: P): P;
  /** Whether no move leaves `phase`. */
  isTerminal(phase: P): boolean;
}

/** Builds a machine from its transition table; the first key is the initial phase. */
export function definePhaseMachine<P extends string>(name: string, transitions: Readonly<Record<P, readonly P[]>>): PhaseMachine<P> {
  const phases = Object.keys(transitions) as P[];
  const initial = phases[0];
  if (initial === undefined) throw new TesseraError('INTERNAL', `the ${name} machine has no phase`);
  return {
    name,
    initial,
    phases,
    canMove: (from, to) => transitions[from].includes(to),
    move(from, to) {
      if (!transitions[from].includes(to)) {
        throw new TesseraError('INTERNAL', `a ${name} cannot move from ${from} to ${to}`, { details: { machine: name, from, to } });
      }
      return to;
    },
    isTerminal: (phase) => transitions[phase].length === 0,
  };
}

/** The donor's phases, in order; `aborted` ends a migration that did not commit. */
export type DonorPhase =
  | 'checkingPreconditions'
  | 'registered'
  | 'cloning'
  | 'steady'
  | 'criticalSection'
  | 'recipientCommitted'
  | 'committed'
  | 'released'
  | 'rangeDeletionScheduled'
  | 'aborted';

/** The donor's machine (see the diagram at the top). */
export const donorPhaseMachine: PhaseMachine<DonorPhase> = definePhaseMachine<DonorPhase>('migration donor', {
  checkingPreconditions: ['registered', 'aborted'],
  registered: ['cloning', 'aborted'],
  cloning: ['steady', 'aborted'],
  steady: ['criticalSection', 'aborted'],
  criticalSection: ['recipientCommitted', 'aborted'],
  recipientCommitted: ['committed', 'aborted'],
  committed: ['released'],
  released: ['rangeDeletionScheduled'],
  rangeDeletionScheduled: [],
  aborted: [],
});

/** The donor phases reported in the changelog (`moveChunk.phase`), in the order they happen. */
export const REPORTED_DONOR_PHASES = [
  'registered',
  'cloning',
  'steady',
  'criticalSection',
  'recipientCommitted',
  'committed',
  'released',
  'rangeDeletionScheduled',
] as const satisfies readonly DonorPhase[];
/** A phase the donor reports. */
export type ReportedDonorPhase = (typeof REPORTED_DONOR_PHASES)[number];

/** The recipient's states, as `recvChunkStatus` reports them. */
export type RecipientPhase = 'waitingForRangeDeletion' | 'cloning' | 'catchup' | 'steady' | 'committing' | 'done' | 'failed';

/** The recipient's machine (see the diagram at the top). */
export const recipientPhaseMachine: PhaseMachine<RecipientPhase> = definePhaseMachine<RecipientPhase>('migration recipient', {
  waitingForRangeDeletion: ['cloning', 'failed'],
  cloning: ['catchup', 'failed'],
  catchup: ['steady', 'failed'],
  steady: ['committing', 'failed'],
  committing: ['done', 'failed'],
  done: [],
  failed: [],
});
