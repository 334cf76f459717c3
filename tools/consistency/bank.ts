import type { TxnStatus } from './history.js';

/** A bank workload's operation: a transfer between two accounts, or a read of every account's balance inside one transaction. */
export type BankOp =
  | { id: number; status: TxnStatus; f: 'transfer'; from: string; to: string; amount: number }
  | { id: number; status: TxnStatus; f: 'read'; balances: Readonly<Record<string, number>> | null };

export interface BankAnomaly {
  type: 'wrong-total' | 'negative-balance' | 'missing-account';
  message: string;
  read: number;
}

/**
 * The bank check (as Jepsen's): money moves between accounts and is never made or lost, so every
 * committed read of all accounts, taken inside one transaction, sums to the total the accounts
 * started with, sees every account, and sees no negative balance when transfers refuse to
 * overdraw. A read that sees one side of a transfer and not the other is a wrong total.
 */
export function checkBank(history: readonly BankOp[], accounts: readonly string[], total: number): BankAnomaly[] {
  const anomalies: BankAnomaly[] = [];
  for (const op of history) {
    if (op.f !== 'read' || op.status !== 'ok' || op.balances === null) continue;
    const missing = accounts.filter((a) => op.balances![a] === undefined);
    if (missing.length > 0)
      anomalies.push({ type: 'missing-account', message: `read ${op.id} saw no balance for ${missing.join(', ')}`, read: op.id });
    const sum = accounts.reduce((s, a) => s + (op.balances![a] ?? 0), 0);
    if (sum !== total)
      anomalies.push({
        type: 'wrong-total',
        message: `read ${op.id} summed to ${sum}, not ${total}: ${JSON.stringify(op.balances)}`,
        read: op.id,
      });
    for (const account of accounts)
      if ((op.balances[account] ?? 0) < 0)
        anomalies.push({ type: 'negative-balance', message: `read ${op.id} saw ${account} at ${op.balances[account]}`, read: op.id });
  }
  return anomalies;
}
