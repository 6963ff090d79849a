/** Read-only commands: `ls`, `show`, `stats`, `job`. They need no definitions. */
import type { Command } from "commander";
import { OUTCOMES, STATUSES } from "../../core/model.js";
import { type DerivedState, renderTree } from "../../engine/inspect.js";
import type { ListFilter } from "../../store/store.js";
import { option, parseId, parseInteger, parseStatusFilter } from "../args.js";
import { iso, pairs, print, printJson, short, stateOf, table } from "../format.js";
import { withSession } from "../session.js";
import { renderDetails } from "../timeline.js";

function describeDerived(d: DerivedState): string {
  switch (d.state) {
    case "ready":
      return d.migrates ? "ready (will migrate)" : "ready";
    case "running":
      return d.abortHandler ? "running its abort handler" : `running on ${d.holder ?? "?"}`;
    case "completing":
      return `completing: holds ${d.outcome} until owned work ends`;
    case "blocked":
      return `blocked: ${d.reason}${d.error ? ` (${d.error.message})` : ""}`;
    case "waiting":
      switch (d.on.kind) {
        case "tasks":
          return `waiting (${d.on.policy}) on ${d.on.ids.join(", ") || "nothing live"}`;
        case "event":
          return `waiting for event "${d.on.name}"${d.on.until ? ` until ${iso(d.on.until)}` : ""}`;
        case "owned_work":
          return `aborting: waits for owned ${d.on.ids.join(", ")}`;
        case "needs":
          return `waiting on ${d.on.count} needs`;
        case "seat":
          return `waiting for a seat of "${d.on.seat}"`;
        case "rate":
          return `waiting for rate limit until ${iso(d.on.until)}`;
        case "timer":
          return `waiting until ${iso(d.on.until)}`;
      }
  }
}

interface LsFlags {
  status?: Pick<ListFilter, "status" | "outcome">;
  queue?: string;
  job?: string;
  name?: string;
  limit?: number;
  before?: number;
}

const READ = { mustExist: true } as const;

export function registerInspect(program: Command): void {
  program
    .command("ls")
    .description("list tasks, newest first")
    .option(
      "--status <status>",
      `${STATUSES.join("|")}, or an outcome: ${OUTCOMES.join("|")}`,
      option(parseStatusFilter),
    )
    .option("--queue <queue>", "only this queue")
    .option("--job <job>", "only this job")
    .option("--name <name>", "only this task name")
    .option(
      "--limit <n>",
      "at most n tasks (default 50, max 1000)",
      option((t) => parseInteger(t, "--limit", 1, 1000)),
    )
    .option("--before <id>", "only ids below this one (paging)", option(parseId))
    .action(async (o: LsFlags, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const limit = o.limit ?? 50;
        const tasks = await s.ratchet.list({
          ...(o.status ?? {}),
          queue: o.queue,
          job: o.job,
          name: o.name,
          before: o.before,
          limit,
        });
        if (s.json) return printJson(tasks);
        if (tasks.length === 0) return print("no tasks");
        const rows = tasks.map((t) => [
          String(t.id),
          t.name,
          t.queue,
          stateOf(t),
          String(t.attempts),
          t.job ?? "-",
          iso(t.createdAt),
          iso(t.endedAt),
          short(t.input, 40),
        ]);
        print(table(["ID", "NAME", "QUEUE", "STATE", "ATT", "JOB", "CREATED", "ENDED", "INPUT"], rows));
        if (tasks.length === limit) print(`(more: --before ${tasks.at(-1)!.id})`);
      });
    });

  program
    .command("show")
    .description("a task's timeline: claims, failed attempts and retries, steps, outcome")
    .argument("<id>", "task id", option(parseId))
    .action(async (id: number, _o: unknown, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const d = await s.ratchet.details(id);
        if (s.json) printJson(d);
        else print(renderDetails(d));
      });
    });

  program
    .command("tree")
    .description("a task and everything it owns, as a tree (spawned children, background ones marked)")
    .argument("<id>", "task id", option(parseId))
    .option(
      "--limit <n>",
      "at most n tasks (default 1000)",
      option((t) => parseInteger(t, "--limit", 1, 100_000)),
    )
    .action(async (id: number, o: { limit?: number }, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const tree = await s.ratchet.tree(id, { limit: o.limit ?? 1000 });
        if (s.json) printJson(tree);
        else print(renderTree(tree).join("\n") + (tree.truncated ? "\n… (more; raise --limit)" : ""));
      });
    });

  program
    .command("inspect")
    .description(
      "why each live task is where it is: ready, running, waiting on …, completing, blocked (reason)",
    )
    .option(
      "--limit <n>",
      "at most n live tasks (default 200)",
      option((t) => parseInteger(t, "--limit", 1, 100_000)),
    )
    .action(async (o: { limit?: number }, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const insp = await s.ratchet.inspect({ limit: o.limit ?? 200 });
        if (s.json) return printJson(insp);
        if (insp.tasks.length === 0) return print("no live tasks");
        const rows = insp.tasks.map((t) => [
          String(t.id),
          t.name,
          t.scope,
          t.status,
          describeDerived(t.derived),
        ]);
        print(
          table(["ID", "NAME", "SCOPE", "STATUS", "WHY"], rows) +
            (insp.truncated ? "\n… (more; raise --limit)" : ""),
        );
      });
    });

  program
    .command("why")
    .description(
      "why a task is where it is: not due until …, waiting on …, blocked, behind N tasks, running on …",
    )
    .argument("<id>", "task id", option(parseId))
    .action(async (id: number, _o: unknown, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const e = await s.ratchet.explain(id);
        if (s.json) printJson(e);
        else print(`task ${e.id} (${e.name}, ${e.status}): ${e.text}`);
      });
    });

  program
    .command("schedules")
    .description("schedules: cron, timezone, task, next tick, last tick and the task it enqueued")
    .action(async (_o: unknown, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const rows = await s.ratchet.schedules();
        if (s.json) return printJson(rows);
        if (rows.length === 0) return print("no schedules");
        print(
          table(
            ["NAME", "CRON", "TZ", "TASK", "NEXT", "LAST", "LAST TASK", "MISSED"],
            rows.map((r) => [
              r.name,
              r.cron,
              r.timezone ?? "UTC",
              r.task,
              iso(r.nextAt),
              r.lastAt === null ? "-" : iso(r.lastAt),
              r.lastTask === null ? "-" : String(r.lastTask),
              r.missed,
            ]),
          ),
        );
      });
    });

  program
    .command("stats")
    .description("tasks per queue by status and outcome")
    .action(async (_o: unknown, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const stats = await s.ratchet.stats();
        if (s.json) return printJson(stats);
        if (stats.length === 0) return print("no tasks");
        const live = STATUSES.filter((st) => st !== "terminal");
        const rows = stats.map((q) => [
          q.queue,
          ...live.map((st) => String(q.byStatus[st] ?? 0)),
          ...OUTCOMES.map((oc) => String(q.byOutcome[oc] ?? 0)),
        ]);
        print(table(["QUEUE", ...live, ...OUTCOMES], rows));
      });
    });

  program
    .command("job")
    .description("a job's tasks by status and outcome, and whether it has settled")
    .argument("<name>", "job name")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const j = await s.ratchet.jobStatus(name);
        if (s.json) return printJson(j);
        const counts = (m: Partial<Record<string, number>>) =>
          Object.entries(m)
            .filter(([, n]) => (n ?? 0) > 0)
            .map(([k, n]) => `${k} ${n}`)
            .join(", ") || "-";
        print(
          pairs([
            ["job", j.job],
            ["total", String(j.total)],
            ["status", counts(j.byStatus)],
            ["outcome", counts(j.byOutcome)],
            ["settled", j.settled ? "yes (no live task left)" : "no"],
          ]),
        );
      });
    });
}
