import { DependencyGraph } from './dependency-graph.js';
import type { Anomaly, AnomalyType, DependencyEdge, DependencyKind, ListTxn } from './history.js';

/** At most this many anomalies of one type are reported (with how many more were found). */
const REPORTED_PER_TYPE = 20;

/**
 * Elle's list-append check (Kingsbury and Alvaro, "Elle: Inferring Isolation Anomalies from
 * Experimental Observations"): each value is appended to a key once, so the longest read of a
 * key gives the order of its appends, every read of it must be a prefix of that order, and each
 * read names the transaction whose append it saw last. From them come the dependencies: ww (the
 * next append), wr (the append read last) and rw (the append after what was read), between
 * transactions that committed or may have (an `info` one whose append was read). Reports:
 *
 * - G1a: a committed read saw an append of an aborted transaction;
 * - G1b: it saw an append that was not its writer's last to that key;
 * - G0: a cycle of ww edges; G1c: a cycle of ww and wr edges with a wr;
 * - G-single: a cycle with exactly one rw edge (read skew), G2-item: with two or more;
 * - incompatible-order and duplicate-elements: reads no single order explains.
 *
 * Snapshot isolation forbids all but G2-item (write skew); serializability forbids all.
 */
export function checkListAppend(history: readonly ListTxn[]): { anomalies: Anomaly[]; counts: Partial<Record<AnomalyType, number>> } {
  const found: Anomaly[] = [];
  const writerOf = new Map<string, ListTxn>();
  const appendsOf = new Map<string, Map<number, number[]>>();
  for (const txn of history) {
    for (const op of txn.ops) {
      if (op.f !== 'append') continue;
      const id = `${op.key}\u0000${op.value}`;
      if (writerOf.has(id))
        throw new Error(
          `value ${op.value} appended to ${op.key} twice (transactions ${writerOf.get(id)!.id} and ${txn.id}): the workload must append unique values`,
        );
      writerOf.set(id, txn);
      const byTxn = appendsOf.get(op.key) ?? new Map<number, number[]>();
      byTxn.set(txn.id, [...(byTxn.get(txn.id) ?? []), op.value]);
      appendsOf.set(op.key, byTxn);
    }
  }
  const writer = (key: string, value: number) => writerOf.get(`${key}\u0000${value}`);

  const reads = history
    .filter((t) => t.status === 'ok')
    .flatMap((txn) => txn.ops.flatMap((op) => (op.f === 'r' && op.value !== null ? [{ txn, key: op.key, list: op.value }] : [])));
  const orders = new Map<string, readonly number[]>();
  for (const read of reads) {
    const seen = new Set<number>();
    for (const value of read.list) {
      if (seen.has(value))
        found.push({
          type: 'duplicate-elements',
          message: `transaction ${read.txn.id} read ${value} twice in ${read.key}: [${read.list.join(', ')}]`,
          txns: [read.txn.id],
        });
      seen.add(value);
    }
    const longest = orders.get(read.key);
    if (longest === undefined || read.list.length > longest.length) orders.set(read.key, read.list);
  }
  for (const read of reads) {
    const order = orders.get(read.key)!;
    if (read.list.some((value, i) => order[i] !== value))
      found.push({
        type: 'incompatible-order',
        message: `transaction ${read.txn.id} read ${read.key} as [${read.list.join(', ')}], not a prefix of [${order.join(', ')}]`,
        txns: [read.txn.id],
      });
  }

  const graph = new DependencyGraph();
  const edge = (from: ListTxn | undefined, to: ListTxn | undefined, kind: DependencyKind, key: string, value: number) => {
    if (from !== undefined && to !== undefined && from.status !== 'fail' && to.status !== 'fail')
      graph.add({ from: from.id, to: to.id, kind, key, value });
  };
  for (const [key, order] of orders)
    for (let i = 1; i < order.length; i++) edge(writer(key, order[i - 1]!), writer(key, order[i]!), 'ww', key, order[i]!);
  for (const read of reads) {
    for (const value of read.list) {
      const by = writer(read.key, value);
      if (by?.status === 'fail')
        found.push({
          type: 'G1a',
          message: `transaction ${read.txn.id} read ${value} of ${read.key}, appended by aborted transaction ${by.id}`,
          txns: [read.txn.id, by.id],
        });
    }
    const last = read.list.at(-1);
    if (last !== undefined) {
      const by = writer(read.key, last);
      const appended = by === undefined ? [] : (appendsOf.get(read.key)?.get(by.id) ?? []);
      if (by !== undefined && by.id !== read.txn.id && appended.at(-1) !== last)
        found.push({
          type: 'G1b',
          message: `transaction ${read.txn.id} read ${read.key} ending at ${last}, an intermediate append of transaction ${by.id} (which appended ${appended.join(', ')})`,
          txns: [read.txn.id, by.id],
        });
      edge(by, read.txn, 'wr', read.key, last);
    }
    const next = orders.get(read.key)![read.list.length];
    if (next !== undefined) edge(read.txn, writer(read.key, next), 'rw', read.key, next);
  }

  const cycles: Array<[AnomalyType, DependencyKind, Set<DependencyKind>, { kind: DependencyKind; min: number } | undefined]> = [
    ['G0', 'ww', new Set(['ww']), undefined],
    ['G1c', 'wr', new Set(['ww', 'wr']), undefined],
    ['G-single', 'rw', new Set(['ww', 'wr']), undefined],
    ['G2-item', 'rw', new Set(['ww', 'wr', 'rw']), { kind: 'rw', min: 1 }],
  ];
  const reported = new Set<string>();
  for (const [type, firstKind, allowed, counted] of cycles) {
    for (const first of graph.edgesOf(firstKind)) {
      const cycle = graph.cycleThrough(first, allowed, counted);
      if (cycle === undefined) continue;
      const txns = [...new Set(cycle.map((e) => e.from))].sort((a, b) => a - b);
      // One report per set of transactions: the weakest anomaly they show, found first.
      const id = txns.join(',');
      if (reported.has(id)) continue;
      reported.add(id);
      found.push({ type, message: `${type} cycle: ${describeCycle(cycle)}`, txns, cycle });
    }
  }

  const counts: Partial<Record<AnomalyType, number>> = {};
  const anomalies: Anomaly[] = [];
  for (const anomaly of found) {
    counts[anomaly.type] = (counts[anomaly.type] ?? 0) + 1;
    if (counts[anomaly.type]! <= REPORTED_PER_TYPE) anomalies.push(anomaly);
  }
  return { anomalies, counts };
}

/** `T1 -ww(x=3)-> T2 -rw(y=5)-> T1`. */
export function describeCycle(cycle: readonly DependencyEdge[]): string {
  return `T${cycle[0]!.from} ` + cycle.map((e) => `-${e.kind}(${e.key}=${e.value})-> T${e.to}`).join(' ');
}
