export { errorOf } from '../errors.js';
import type { ConfigClient } from '@tessera/protocol';

/** Short intervals so elections, lock takeovers and failovers happen within a test's patience. */
export const FAST_CONFIG_ENV = {
  TESSERA_LEADER_LEASE_MS: '2000',
  TESSERA_LEADER_RENEW_INTERVAL_MS: '200',
  TESSERA_LOCK_PING_INTERVAL_MS: '300',
  TESSERA_LOCK_TAKEOVER_MS: '2000',
  TESSERA_LOCK_WAIT_MS: '3000',
  TESSERA_SHARD_MONITOR_INTERVAL_MS: '500',
};

/** Polls `probe` every 100 ms until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Waits until the config process behind `client` leads. */
export async function waitForLeader(client: ConfigClient): Promise<void> {
  await eventually(async () => ((await client.leader()).self.isLeader ? true : undefined), `${client.url} to lead`);
}

/** A GraphQL operation on a config process's control plane with `token`; throws on GraphQL errors, answers the data. */
export async function controlPlane<T>(
  configUrl: string,
  token: string,
  query: string,
  variables: Record<string, unknown> = {},
): Promise<T> {
  const response = await fetch(`${configUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const answer = (await response.json()) as { data?: T; errors?: unknown };
  if (answer.errors) throw new Error(`GraphQL errors: ${JSON.stringify(answer.errors)}`);
  return answer.data as T;
}

/** Splits a collection ranged on one numeric field at the points and spreads its (still empty) chunks over shard0..2, one chunk each. */
export async function spreadChunks(config: ConfigClient, ns: string, points: number[]): Promise<void> {
  for (const point of points) {
    const chunks = await config.getChunks({ ns });
    const holder = chunks.chunks.find((c) => isBelow(c.range.min[0], point) && !isBelow(c.range.max[0], point + 1))!;
    await config.commitSplit({
      ns,
      expectedCollectionVersion: chunks.collectionVersion,
      shard: holder.shard,
      range: holder.range,
      splitPoints: [[point]],
    });
  }
  const targets = ['shard0', 'shard1', 'shard2'];
  const placed = await config.getChunks({ ns });
  for (const [index, chunk] of placed.chunks.entries()) {
    const target = targets[index % targets.length]!;
    if (chunk.shard === target) continue;
    const current = await config.getChunks({ ns });
    await config.commitMigration({
      ns,
      expectedCollectionVersion: current.collectionVersion,
      range: chunk.range,
      donor: chunk.shard,
      recipient: target,
    });
  }
}

/** True when a bound (a number, MinKey or MaxKey in Extended JSON) is below `value`. */
function isBelow(bound: unknown, value: number): boolean {
  if (typeof bound === 'number') return bound < value;
  return (bound as Record<string, unknown>).$minKey !== undefined;
}

/** A `balancer.round` changelog row's timing. */
interface RoundTiming {
  startedAt: string;
  durationMs: number;
  migrations: readonly unknown[];
}

/**
 * The pairs of rounds that issued migrations where the later started before the earlier ended
 * (`[earlier, later]` by index): the continuous scheduler plans while migrations are under way,
 * MongoDB's rounds never do.
 */
export function overlappingRounds(rounds: readonly RoundTiming[]): Array<[number, number]> {
  const spans = rounds
    .map((r, i) => ({ i, start: Date.parse(r.startedAt), end: Date.parse(r.startedAt) + r.durationMs, issued: r.migrations.length > 0 }))
    .filter((r) => r.issued)
    .sort((a, b) => a.start - b.start);
  const pairs: Array<[number, number]> = [];
  for (const [k, earlier] of spans.entries())
    for (const later of spans.slice(k + 1)) if (later.start < earlier.end) pairs.push([earlier.i, later.i]);
  return pairs;
}

/** A donor's summary of a committed migration (`moveChunk.from`): its shards and each phase with when it began. */
export interface DonorSummary {
  from: string;
  to: string;
  phases: Array<{ phase: string; at: string }>;
}

/**
 * The pairs of committed migrations that overlapped on one shard in `role`: by the donor's
 * clock, from the phase `cloning` (the recipient registered) to `released` (the recipient let
 * go), a span inside both shards' registrations, so an overlap found is a real one.
 */
export function overlappingMigrations(
  summaries: readonly DonorSummary[],
  role: 'donor' | 'recipient',
): Array<[DonorSummary, DonorSummary]> {
  const at = (s: DonorSummary, phase: string) => Date.parse(s.phases.find((p) => p.phase === phase)!.at);
  const shardOf = (s: DonorSummary) => (role === 'donor' ? s.from : s.to);
  const pairs: Array<[DonorSummary, DonorSummary]> = [];
  for (const [k, a] of summaries.entries())
    for (const b of summaries.slice(k + 1))
      if (shardOf(a) === shardOf(b) && at(a, 'cloning') < at(b, 'released') && at(b, 'cloning') < at(a, 'released')) pairs.push([a, b]);
  return pairs;
}
