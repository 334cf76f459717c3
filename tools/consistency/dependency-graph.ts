import type { DependencyEdge, DependencyKind } from './history.js';

/**
 * Transactions and the dependencies between them, searched for cycles of given edge kinds.
 * Pure; breadth-first, so each cycle found is a shortest one through its first edge.
 */
export class DependencyGraph {
  private readonly out = new Map<number, DependencyEdge[]>();
  private readonly edges: DependencyEdge[] = [];

  add(edge: DependencyEdge): void {
    if (edge.from === edge.to) return;
    const list = this.out.get(edge.from) ?? [];
    if (list.some((e) => e.to === edge.to && e.kind === edge.kind)) return;
    list.push(edge);
    this.out.set(edge.from, list);
    this.edges.push(edge);
  }

  edgesOf(kind: DependencyKind): DependencyEdge[] {
    return this.edges.filter((e) => e.kind === kind);
  }

  /**
   * A cycle that starts with `first` and returns to its source through edges of `allowed`
   * kinds, with at least `minMore` edges of kind `counted` after the first; undefined if none.
   */
  cycleThrough(
    first: DependencyEdge,
    allowed: ReadonlySet<DependencyKind>,
    counted?: { kind: DependencyKind; min: number },
  ): DependencyEdge[] | undefined {
    const need = counted?.min ?? 0;
    // States: (node, how many `counted` edges used so far, capped at `need`).
    const key = (node: number, used: number) => `${node}:${used}`;
    const back = new Map<string, { edge: DependencyEdge; from: string } | null>();
    const start = key(first.to, 0);
    back.set(start, null);
    const queue: Array<[number, number]> = [[first.to, 0]];
    while (queue.length > 0) {
      const [node, used] = queue.shift()!;
      if (node === first.from && used >= need) return [first, ...this.path(back, key(node, used))];
      for (const edge of this.out.get(node) ?? []) {
        if (!allowed.has(edge.kind)) continue;
        const next = Math.min(need, used + (counted !== undefined && edge.kind === counted.kind ? 1 : 0));
        const state = key(edge.to, next);
        if (back.has(state)) continue;
        back.set(state, { edge, from: key(node, used) });
        queue.push([edge.to, next]);
      }
    }
    return undefined;
  }

  private path(back: Map<string, { edge: DependencyEdge; from: string } | null>, end: string): DependencyEdge[] {
    const edges: DependencyEdge[] = [];
    for (let step = back.get(end); step; step = back.get(step.from)) edges.unshift(step.edge);
    return edges;
  }
}
