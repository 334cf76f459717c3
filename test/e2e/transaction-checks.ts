import type { BankOp } from '../../tools/consistency/bank.js';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { eventually } from './helpers.js';
import { type RouterApi, onShardDatabase } from './router-api.js';

/** Prepared transactions left on the shards' databases. */
export async function preparedLeft(cluster: LocalCluster, shards: readonly string[]): Promise<number> {
  let left = 0;
  for (const shard of shards) {
    left += await onShardDatabase(cluster, shard, async (pool) =>
      Number(
        (
          await pool.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_prepared_xacts WHERE gid LIKE 'tessera:%' AND database = current_database()",
          )
        ).rows[0]!.n,
      ),
    );
  }
  return left;
}

/** Every account's balance, by `_id` as a string. */
export async function balancesOf(router: RouterApi, ns: string): Promise<Map<string, number>> {
  const docs = (await router.findAll(ns, { filter: {} })) as Array<{ _id: number; balance: number }>;
  return new Map(docs.map((d) => [String(d._id), d.balance]));
}

/**
 * The balances once no prepared transaction is left, read as the latest versions: every
 * acknowledged commit has reached every shard by then.
 */
export async function settledBalances(
  cluster: LocalCluster,
  shards: readonly string[],
  router: RouterApi,
  ns: string,
): Promise<Map<string, number>> {
  await eventually(
    async () => ((await preparedLeft(cluster, shards)) === 0 ? true : undefined),
    'every prepared transaction resolved',
    60_000,
  );
  return eventually(() => balancesOf(router, ns), 'the balances through the router', 60_000);
}

/**
 * Whether some of the transfers whose outcome the client never learned, applied with the
 * acknowledged ones to `initial`, give exactly `final`: nothing acknowledged lost, nothing
 * unacknowledged half-applied. Tries every subset of the unknown transfers that touch an account
 * the acknowledged ones do not explain, at most 16 of them; answers why not otherwise.
 */
export function unexplainedBalances(
  history: readonly BankOp[],
  initial: ReadonlyMap<string, number>,
  final: ReadonlyMap<string, number>,
): string | undefined {
  const expected = new Map(initial);
  const unknown: Array<{ from: string; to: string; amount: number }> = [];
  for (const op of history) {
    if (op.f !== 'transfer') continue;
    if (op.status === 'ok') {
      expected.set(op.from, expected.get(op.from)! - op.amount);
      expected.set(op.to, expected.get(op.to)! + op.amount);
    } else if (op.status === 'info') unknown.push(op);
  }
  const accounts = [...initial.keys()];
  const off = new Set(accounts.filter((a) => expected.get(a) !== final.get(a)));
  if (off.size === 0) return undefined;
  const candidates = unknown.filter((op) => off.has(op.from) || off.has(op.to));
  if (candidates.length > 16) return `${candidates.length} transfers of unknown outcome could explain the balances: too many to try`;
  for (let subset = 1; subset < 1 << candidates.length; subset++) {
    const balances = new Map(expected);
    candidates.forEach((op, n) => {
      if ((subset & (1 << n)) === 0) return;
      balances.set(op.from, balances.get(op.from)! - op.amount);
      balances.set(op.to, balances.get(op.to)! + op.amount);
    });
    if (accounts.every((a) => balances.get(a) === final.get(a))) return undefined;
  }
  return `balances not explained by the acknowledged transfers: ${[...off].map((a) => `${a}: ${final.get(a)} not ${expected.get(a)}`).join(', ')}`;
}

/** How many transfers committed, aborted and stayed unknown, and how many reads committed. */
export function bankSummary(history: readonly BankOp[]): { committed: number; aborted: number; unknown: number; reads: number } {
  const transfers = history.filter((op) => op.f === 'transfer');
  return {
    committed: transfers.filter((op) => op.status === 'ok').length,
    aborted: transfers.filter((op) => op.status === 'fail').length,
    unknown: transfers.filter((op) => op.status === 'info').length,
    reads: history.filter((op) => op.f === 'read' && op.status === 'ok').length,
  };
}
