/** What the page knows about a collection and the balancer, to say why nothing moves. */
export interface IdleInputs {
  balancerMode: string;
  window: { start: string; stop: string } | null;
  /** The config server's time of day, HH:MM (the window is in its time zone). */
  now: string;
  balancingEnabled: boolean;
  compliant: boolean;
  violation: string | null;
  drainingShards: string[];
  jumboChunks: number;
  activeMigrations: number;
  /** The last round's throttle sleep, ms. */
  throttleMs: number;
  roundErrors: string[];
}

export function insideWindow(now: string, window: { start: string; stop: string }): boolean {
  return window.start <= window.stop ? now >= window.start && now < window.stop : now >= window.start || now < window.stop;
}

/**
 * Why a collection's chunks are not moving, in words, most decisive first: the balancer is off,
 * outside its window, or off for the collection; the collection is compliant; or it is not and
 * something holds it (jumbo chunks, a draining shard, the throttle, errors). Empty while
 * migrations of the collection run: then it is moving.
 */
export function whyIdle(i: IdleInputs): string[] {
  if (i.activeMigrations > 0) return [];
  const reasons: string[] = [];
  if (i.balancerMode === 'off') reasons.push('The balancer is off (setBalancerState or Settings).');
  else if (i.window !== null && !insideWindow(i.now, i.window))
    reasons.push(`Outside the balancing window ${i.window.start}–${i.window.stop} (now ${i.now}).`);
  if (!i.balancingEnabled) reasons.push('Balancing is off for this collection (configureCollectionBalancing).');
  if (i.compliant) reasons.push('Compliant: the shards are within the imbalance threshold, no zone is violated and no shard drains.');
  else {
    reasons.push(`Not compliant: ${describeViolation(i.violation)}.`);
    if (i.jumboChunks > 0) reasons.push(`${i.jumboChunks} jumbo chunk(s) cannot move unless attemptToBalanceJumboChunks is on.`);
    if (i.drainingShards.length > 0) reasons.push(`Draining: ${i.drainingShards.join(', ')}.`);
    if (i.throttleMs > 0) reasons.push(`Throttled: the last round slept ${i.throttleMs} ms before migrating.`);
    for (const error of i.roundErrors) reasons.push(`The last round failed here: ${error}`);
  }
  return reasons;
}

export function describeViolation(violation: string | null): string {
  switch (violation) {
    case 'draining':
      return 'a shard holding chunks is draining';
    case 'zoneViolation':
      return 'chunks lie on shards outside their zone';
    case 'chunksImbalance':
      return 'the data size differs between shards by more than the threshold';
    case 'defragmentingChunks':
      return 'the collection is being defragmented';
    case null:
      return 'no rule named';
    default:
      return violation;
  }
}
