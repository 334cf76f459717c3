import type { TransactionDecision, TransactionId } from '@tessera/protocol';
import type { CoordinatorStore } from './coordinator.store.js';
import type { ParticipantStore } from './participant.store.js';

/**
 * The decision a coordinator's database holds for a transaction it is not deciding now: the
 * record's while there is one; once it is forgotten (every participant committed), the
 * coordinator's own commit, as a participant, says so; otherwise abort, recorded first (presumed
 * abort), so that no later commit of the same transaction can decide otherwise. `presumed` says
 * the answer is that presumed abort. The coordinator asks its own database; a peer asks it while
 * the coordinator's process is down.
 */
export async function recordedDecision(
  coordinators: CoordinatorStore,
  participants: ParticipantStore,
  id: TransactionId,
): Promise<{ decision: TransactionDecision; presumed: boolean }> {
  const recorded = await coordinators.find(id);
  if (recorded !== undefined) return { decision: recorded.decision, presumed: false };
  const committedAt = await participants.committedAt(id);
  if (committedAt !== undefined) return { decision: { decision: 'commit', commitTime: committedAt }, presumed: false };
  const decision = await coordinators.decide(id, [], { decision: 'abort' });
  return { decision, presumed: decision.decision === 'abort' };
}
