import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import {
  REPORTED_DONOR_PHASES,
  type DonorPhase,
  definePhaseMachine,
  donorPhaseMachine,
  recipientPhaseMachine,
} from './migration-phase.machine.js';

describe('the donor phase machine', () => {
  it('walks the reported phases in order from its initial phase', () => {
    let phase: DonorPhase = donorPhaseMachine.initial;
    for (const next of REPORTED_DONOR_PHASES) phase = donorPhaseMachine.move(phase, next);
    expect(phase).toBe('rangeDeletionScheduled');
    expect(donorPhaseMachine.isTerminal(phase)).toBe(true);
  });

  it.each<DonorPhase>(['checkingPreconditions', 'registered', 'cloning', 'steady', 'criticalSection', 'recipientCommitted'])(
    'aborts from %s',
    (phase) => expect(donorPhaseMachine.canMove(phase, 'aborted')).toBe(true),
  );

  it.each<DonorPhase>(['committed', 'released', 'rangeDeletionScheduled', 'aborted'])('cannot abort once %s', (phase) => {
    expect(donorPhaseMachine.canMove(phase, 'aborted')).toBe(false);
  });

  it.each<[DonorPhase, DonorPhase]>([
    ['registered', 'steady'],
    ['cloning', 'criticalSection'],
    ['steady', 'committed'],
    ['aborted', 'registered'],
    ['committed', 'committed'],
  ])('refuses to skip or go back: %s to %s', (from, to) => {
    expect(() => donorPhaseMachine.move(from, to)).toThrow(TesseraError);
    try {
      donorPhaseMachine.move(from, to);
    } catch (error) {
      expect((error as TesseraError).code).toBe('INTERNAL');
      expect((error as TesseraError).details).toEqual({ machine: 'migration donor', from, to });
    }
  });
});

describe('the recipient phase machine', () => {
  it('goes from waiting for range deletions to done', () => {
    const path = ['cloning', 'catchup', 'steady', 'committing', 'done'] as const;
    let phase = recipientPhaseMachine.initial;
    expect(phase).toBe('waitingForRangeDeletion');
    for (const next of path) phase = recipientPhaseMachine.move(phase, next);
    expect(recipientPhaseMachine.isTerminal(phase)).toBe(true);
  });

  it('fails from every state before done, and never leaves failed', () => {
    for (const phase of recipientPhaseMachine.phases) {
      const terminal = phase === 'done' || phase === 'failed';
      expect(recipientPhaseMachine.canMove(phase, 'failed')).toBe(!terminal);
    }
    expect(recipientPhaseMachine.isTerminal('failed')).toBe(true);
  });

  it('commits only from steady state', () => {
    expect(recipientPhaseMachine.canMove('catchup', 'committing')).toBe(false);
    expect(recipientPhaseMachine.canMove('cloning', 'committing')).toBe(false);
    expect(recipientPhaseMachine.canMove('steady', 'committing')).toBe(true);
  });
});

describe('definePhaseMachine', () => {
  it('takes the first phase of the table as the initial one', () => {
    const machine = definePhaseMachine<'a' | 'b'>('toy', { a: ['b'], b: [] });
    expect(machine.initial).toBe('a');
    expect(machine.phases).toEqual(['a', 'b']);
  });
});
