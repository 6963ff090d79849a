/**
 * A conversation's agent activity (spec §19.33): the run's tool calls and subagents as a tree beside
 * the transcript, each node with its status and its output streams, live. Tool calls are the run's
 * children spawned as `tool:<callId>` (spec §19.10); a foreground subagent's child conversation runs
 * as a task owned by its call (spec §19.13), so it nests under the call with its own calls below it.
 *
 * The tree is the one the conversation page already polls (`/api/tasks/:run/tree`); streams reuse
 * the task page's panels (Server-Sent Events, spec §16.5). Bounds: MAX_NODES nodes are drawn, and
 * the streams of the first MAX_STREAMED of them are followed.
 */
import type { JSX } from "preact";
import { short } from "../format.js";
import { taskHref } from "../router.js";
import type { Tree } from "../types.js";
import { conversationHref } from "./Conversations.js";
import { StateBadge } from "./StateBadge.js";
import { Streams } from "./Streams.js";

const MAX_NODES = 200;
const MAX_STREAMED = 40;

type Kind = "run" | "tool" | "subagent" | "task";

/** What a node is, read from the task the tree holds: a tool call, a subagent's run, or other work. */
function describe(t: Tree["task"], root: boolean): { kind: Kind; label: JSX.Element | string } {
  const input = (t.input ?? {}) as { tool?: unknown; args?: unknown; conversationId?: unknown };
  if (t.spawnName?.startsWith("tool:") && typeof input.tool === "string")
    return {
      kind: "tool",
      label: (
        <>
          <strong>{input.tool}</strong> <span class="muted">{short(input.args, 120)}</span>
        </>
      ),
    };
  if (typeof input.conversationId === "string" && !t.spawnName?.startsWith("tool:")) {
    if (root) return { kind: "run", label: `run of ${input.conversationId}` };
    return {
      kind: "subagent",
      label: (
        <>
          subagent <a href={conversationHref(input.conversationId)}>{input.conversationId}</a>
        </>
      ),
    };
  }
  return { kind: "task", label: t.spawnName ?? t.name };
}

function AgentNode({ node, root, budget }: { node: Tree; root: boolean; budget: { nodes: number } }) {
  const t = node.task;
  const d = describe(t, root);
  const streamed = budget.nodes-- > MAX_NODES - MAX_STREAMED;
  const children = node.children.filter(() => budget.nodes > 0);
  return (
    <li data-agent-node={t.id} data-kind={d.kind} data-status={t.status} data-outcome={t.outcome ?? ""}>
      <div class={`agent-node agent-${d.kind}`}>
        <a href={taskHref(t.id)}>#{t.id}</a> {d.label} <StateBadge task={t} />
      </div>
      {streamed && <Streams taskId={t.id} live={t.status !== "terminal"} quiet />}
      {children.length > 0 && (
        <ul>
          {children.map((c) => (
            <AgentNode key={c.task.id} node={c} root={false} budget={budget} />
          ))}
        </ul>
      )}
    </li>
  );
}

/** The tree of one run (the one in progress, or the conversation's last). */
export function AgentTree({ tree }: { tree: Tree }) {
  return (
    <div data-section="agent-tree">
      <ul class="agent-tree">
        <AgentNode node={tree} root budget={{ nodes: MAX_NODES }} />
      </ul>
      {tree.truncated && <p class="muted">The run's tree is larger than what was read.</p>}
    </div>
  );
}
