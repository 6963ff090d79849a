/**
 * The owner tree as a graph: each task a box, the tasks it owns below it,
 * joined by lines (CSS draws the edges from the nesting). The task being
 * viewed is highlighted; background children are marked, since an abort of
 * the owner does not reach them (spec §12.2).
 */
import { taskHref } from "../router.js";
import type { Tree } from "../types.js";
import { StateBadge } from "./StateBadge.js";

/** Boxes drawn at most: a bigger tree is cut, and says so. */
const MAX_NODES = 300;

interface Shown {
  task: Tree["task"];
  children: Shown[];
  hidden: number;
}

/** Depth first, at most `budget.left` boxes; what is cut is counted under its owner. */
function prune(node: Tree, budget: { left: number }): Shown {
  budget.left--;
  const children: Shown[] = [];
  let hidden = 0;
  for (const c of node.children) {
    if (budget.left > 0) children.push(prune(c, budget));
    else hidden++;
  }
  return { task: node.task, children, hidden };
}

function Node({ node, current }: { node: Shown; current: number }) {
  const t = node.task;
  return (
    <li>
      <div
        class={`node${t.id === current ? " current" : ""}${t.background ? " background" : ""}`}
        data-node={t.id}
      >
        <a href={taskHref(t.id)}>#{t.id}</a> <span class="node-name">{t.spawnName ?? t.name}</span>
        <div>
          <StateBadge task={t} />
          {t.background && <span class="tag">background</span>}
        </div>
        {t.progress !== null && t.status !== "terminal" && <progress max={1} value={t.progress} />}
      </div>
      {(node.children.length > 0 || node.hidden > 0) && (
        <ul>
          {node.children.map((c) => (
            <Node key={c.task.id} node={c} current={current} />
          ))}
          {node.hidden > 0 && (
            <li>
              <div class="node more">+{node.hidden} more</div>
            </li>
          )}
        </ul>
      )}
    </li>
  );
}

export function TreeView({ tree, current }: { tree: Tree; current: number }) {
  return (
    <div class="tree-wrap" data-section="tree">
      <ul class="tree">
        <Node node={prune(tree, { left: MAX_NODES })} current={current} />
      </ul>
      {tree.truncated && (
        <p class="muted">The tree is larger than what was read; deeper tasks are not shown.</p>
      )}
    </div>
  );
}

/** Every id in the tree, root first (for the stream's watch list). */
export function treeIds(tree: Tree, out: number[] = []): number[] {
  out.push(tree.task.id);
  for (const c of tree.children) treeIds(c, out);
  return out;
}
