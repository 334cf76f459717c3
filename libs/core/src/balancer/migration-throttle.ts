/**
 * MongoDB's balancer throttle (balancer.cpp, `balancerMigrationsThrottlingMs`): before a round
 * issues migrations it sleeps what is left of `throttlingMs` since the previous round's migrations
 * ended, so the time the round spent on its snapshot and selection counts toward it. `null`: no
 * migration yet (no sleep). Zero when the throttle has passed or is 0.
 */
export function migrationThrottleMs(throttlingMs: number, lastMigrationEndMs: number | null, nowMs: number): number {
  if (lastMigrationEndMs === null) return 0;
  return Math.max(0, throttlingMs - (nowMs - lastMigrationEndMs));
}
