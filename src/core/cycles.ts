/**
 * Cycle detection over `needs` edges. spec §2.6.
 * Edges run from a task to each task it needs. Iterative DFS with colours,
 * so deep chains cannot overflow the stack.
 * Returns the path of one cycle (first node repeated at the end) or null.
 */
export function findCycle<K>(nodes: Iterable<K>, needsOf: (node: K) => readonly K[]): K[] | null {
  const WHITE = 0;
  const GREY = 1;
  const BLACK = 2;
  const colour = new Map<K, number>();
  for (const start of nodes) {
    if ((colour.get(start) ?? WHITE) !== WHITE) continue;
    const stack: { node: K; next: number }[] = [{ node: start, next: 0 }];
    colour.set(start, GREY);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const edges = needsOf(top.node);
      if (top.next < edges.length) {
        const child = edges[top.next++]!;
        const c = colour.get(child) ?? WHITE;
        if (c === GREY) {
          const from = stack.findIndex((f) => f.node === child);
          return [...stack.slice(from).map((f) => f.node), child];
        }
        if (c === WHITE) {
          colour.set(child, GREY);
          stack.push({ node: child, next: 0 });
        }
      } else {
        colour.set(top.node, BLACK);
        stack.pop();
      }
    }
  }
  return null;
}
