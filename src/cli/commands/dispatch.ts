/**
 * Dispatch commands (spec §20.25): `ratchet dispatch run` (the runner),
 * `ratchet dispatch closeout ATTEMPT JSON`, `ratchet dispatch wake ATTEMPT`, `ratchet dispatch why ATTEMPT`, `ratchet items`, `ratchet item add
 * PIPELINE JSON`, `ratchet item close ID`, `ratchet item move ID STEP`, `ratchet item why ID` (spec §20.30), `ratchet attempts`, `ratchet attempt ID`
 * (the attempt and its timeline). Every command takes --json.
 */
import { existsSync } from "node:fs";
import type { Command } from "commander";
import { explainAttempt, explainItemStuck, stepTimeoutOf } from "../../core/dispatch/explain.js";
import { definePipeline, type Pipeline } from "../../core/dispatch/pipeline.js";
import { explainPrWait } from "../../core/dispatch/pulls.js";
import { resolveTimeouts } from "../../core/dispatch/timeouts.js";
import { buildWorkers, DEFAULT_DISPATCH_CONFIG, readDispatchConfig } from "../../dispatch/config.js";
import { buildForges, forgeConfigsOf } from "../../dispatch/forge/config.js";
import { PullWatcher } from "../../dispatch/forge/watcher.js";
import { DispatchRunner } from "../../dispatch/runner/runner.js";
import { parseCloseout } from "../../dispatch/workers/adapter.js";
import { ConfigError, ValidationError } from "../../errors.js";
import type { DispatchCapable, DispatchOps, ItemRow } from "../../store/dispatch/ops.js";
import { pullOps } from "../../store/pulls/ops.js";
import { option, parseInteger, parseJson, UsageError } from "../args.js";
import { iso, pairs, print, printJson, short, table } from "../format.js";
import { nextSignal, type Session, withSession } from "../session.js";
import { senderOf } from "./outbox.js";

const limitOption = option((t) => parseInteger(t, "--limit", 1, 1_000));
const intervalOption = option((t) => parseInteger(t, "--interval", 10, 60_000));
const ITEM_STATES = ["open", "running", "done", "closed", "archived"];

export function opsOf(s: Session): DispatchOps {
  const ops = (s.ratchet.store as unknown as Partial<DispatchCapable>).dispatch;
  if (!ops) throw new ConfigError("this store has no dispatch operations");
  return ops;
}

interface ItemsOptions {
  state?: string;
  pipeline?: string;
  after?: string;
  limit?: number;
  config?: string;
}

function state(o: { state?: string }, allowed: readonly string[]): string | null {
  if (o.state === undefined) return null;
  if (!allowed.includes(o.state)) throw new UsageError(`--state must be one of ${allowed.join(", ")}`);
  return o.state;
}

/** The checked pipelines of the configuration: `--config`, else the default file if present, else none. */
function configuredPipelines(file: string | undefined): Map<string, Pipeline> | null {
  const path = file ?? DEFAULT_DISPATCH_CONFIG;
  if (file === undefined && !existsSync(path)) return null;
  return new Map(readDispatchConfig(path).pipelines.map((p) => [p.name, definePipeline(p)]));
}

/** spec §22.7: what an item waits for on its pull request, as a sentence, or null. */
async function prWaitSentence(s: Session, item: ItemRow): Promise<string | null> {
  if (item.prWait === null) return null;
  const pull = await pullOps({ dispatch: opsOf(s), now: () => s.ratchet.store.now() }).ofItem(item.id);
  return explainPrWait(item.prWait, pull);
}

export function registerDispatch(program: Command): void {
  registerRunnerCommands(program.command("dispatch").description("supervise agent sessions (spec §20)"));
  registerItemCommands(program);
  registerAttemptCommands(program);
}

/** `dispatch run`, `dispatch closeout`, `dispatch wake`, `dispatch why`. */
function registerRunnerCommands(dispatch: Command): void {
  dispatch
    .command("run")
    .description(
      `run the dispatch runner until SIGINT/SIGTERM (config: --config or ${DEFAULT_DISPATCH_CONFIG})`,
    )
    .option("--config <file>", "dispatch configuration (JSON)")
    .option(
      "--interval <ms>",
      "wait between passes (default the config's intervalMs, else 1000)",
      intervalOption,
    )
    .action(async (o: { config?: string; interval?: number }, cmd: Command) => {
      const c = readDispatchConfig(o.config ?? DEFAULT_DISPATCH_CONFIG);
      await withSession(cmd, {}, async (s) => {
        const store = { dispatch: opsOf(s), now: () => s.ratchet.store.now() };
        // spec §22.4–§22.5: a configured forge links close-outs' pull requests and watches them.
        const forge = forgeConfigsOf(c.dir, c.forge);
        const built = forge.length > 0 ? buildForges(forge) : null;
        const runner = new DispatchRunner({
          store,
          pipelines: c.pipelines,
          workers: buildWorkers(c),
          seats: c.seats,
          timeouts: c.timeouts,
          leaseMs: c.leaseMs,
          pullHosts: built?.hosts,
          outputScanMs: built?.outputScanMs,
        });
        const watcher = built
          ? new PullWatcher({
              store,
              forges: built.forges,
              policy: built.policy,
              concurrency: built.concurrency,
            })
          : null;
        const watching = watcher?.run({
          onPass: (r) => {
            for (const l of r.looks) {
              if (l.kind === "failed") print(`pull request ${l.pull}: failed: ${l.error}`);
              if (l.kind === "changed") print(`pull request ${l.pull}: ${l.facts.join(", ")}`);
            }
            for (const e of r.errors) print(`error: ${e}`);
          },
        });
        const onPass = (r: Awaited<ReturnType<DispatchRunner["pass"]>>) => {
          if (s.json) return print(JSON.stringify(r));
          for (const d of r.decisions.filter((x) => x.applied !== "nothing"))
            print(`attempt ${d.attempt}: ${d.action} (${d.rule}) ${d.applied}`);
          for (const e of r.errors) print(`error: attempt ${e.attempt ?? "-"}: ${e.message}`);
          for (const l of r.linked) print(`attempt ${l.attempt}: linked ${l.url} (output)`);
          for (const e of r.outputFailed) print(`attempt ${e.attempt}: ${e.message}`);
        };
        // spec §21.5: the config's outbox destinations are delivered beside the runner.
        const sender = senderOf(o.config ?? DEFAULT_DISPATCH_CONFIG, s.ratchet.store);
        sender?.start();
        const done = runner.run({ intervalMs: o.interval ?? c.intervalMs, onPass });
        await Promise.race([nextSignal().then(() => runner.stop()), done]);
        await done;
        watcher?.stop();
        await watching;
        await sender?.stop();
      });
    });

  dispatch
    .command("closeout")
    .description('report an attempt\'s close-out: {"outcome":"succeeded"|"failed","summary"?,"data"?}')
    .argument("<attempt>", "attempt id")
    .argument("<json>", "the close-out")
    .action(async (attempt: string, text: string, _o: unknown, cmd: Command) => {
      const value = parseJson(text, "the close-out") as { outcome?: unknown };
      const checked = parseCloseout(JSON.stringify(value));
      if (checked.outcome !== value.outcome) throw new ValidationError(`bad close-out: ${checked.summary}`);
      await withSession(cmd, { mustExist: true }, async (s) => {
        const a = await opsOf(s).recordCloseout(attempt, JSON.stringify(checked));
        if (!a) throw new UsageError(`attempt ${attempt} is not live (settled or unknown)`);
        if (s.json) return printJson(a);
        print(`attempt ${a.id} is ${a.state} (${a.closing})`);
      });
    });

  dispatch
    .command("wake")
    .description(
      "ask a sleeping attempt to wake: the runner takes a seat for it (over the cap after seatlessSeconds)",
    )
    .argument("<attempt>", "attempt id")
    .action(async (attempt: string, _o: unknown, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const a = await opsOf(s).requestWake(attempt, "operator");
        if (!a) throw new UsageError(`attempt ${attempt} is not sleeping, or its wake was requested already`);
        if (s.json) return printJson(a);
        print(`attempt ${a.id}: wake requested`);
      });
    });

  dispatch
    .command("why")
    .description("why an attempt is where it is, and the next timeout that would move it")
    .argument("<attempt>", "attempt id")
    .option(
      "--config <file>",
      `dispatch configuration for the timeouts (default ${DEFAULT_DISPATCH_CONFIG} if present)`,
    )
    .action(async (attempt: string, o: { config?: string }, cmd: Command) => {
      const path = o.config ?? DEFAULT_DISPATCH_CONFIG;
      const c = o.config !== undefined || existsSync(path) ? readDispatchConfig(path) : null;
      await withSession(cmd, { mustExist: true }, async (s) => {
        const a = await opsOf(s).getAttempt(attempt);
        if (!a) throw new UsageError(`there is no attempt ${attempt}`);
        const pipelines = new Map((c?.pipelines ?? []).map((p) => [p.name, definePipeline(p)]));
        const why = explainAttempt({
          attempt: a,
          stepTimeoutMinutes: stepTimeoutOf(pipelines, a),
          timeouts: resolveTimeouts(c?.timeouts),
        });
        const item = a.endedAt === null ? null : await opsOf(s).getItem(a.itemId);
        const wait = item ? await prWaitSentence(s, item) : null;
        if (s.json) return printJson(wait ? { ...why, prWait: wait } : why);
        print(`attempt ${a.id}: ${why.sentence}${wait ? `; its item ${item!.id}: ${wait}` : ""}`);
      });
    });
}

/** `items`, `item add`, `item close`, `item archive`. */
function registerItemCommands(program: Command): void {
  program
    .command("items")
    .description("list dispatch items (id order)")
    .option("--state <s>", `only items in this state (${ITEM_STATES.join(", ")})`)
    .option("--pipeline <name>", "only items of this pipeline")
    .option("--after <id>", "only items after this id")
    .option("--limit <n>", "at most this many (default 100, up to 1000)", limitOption)
    .option(
      "--config <file>",
      `dispatch configuration, to say which open items are stuck at a step their pipeline no longer has (default ${DEFAULT_DISPATCH_CONFIG} if present)`,
    )
    .action(async (o: ItemsOptions, cmd: Command) => {
      const st = state(o, ITEM_STATES) as Parameters<DispatchOps["listItems"]>[0]["state"];
      const pipelines = configuredPipelines(o.config);
      await withSession(cmd, { mustExist: true }, async (s) => {
        const list = await opsOf(s).listItems({
          state: st,
          pipeline: o.pipeline,
          after: o.after,
          limit: o.limit ?? 100,
        });
        // spec §20.30: with the configuration at hand, each row says whether it is stuck.
        const rows = list.map((i) => ({ ...i, stuck: pipelines ? explainItemStuck(i, pipelines) : null }));
        if (s.json) return printJson(rows);
        print(
          table(
            ["ID", "PIPELINE", "STEP", "STATE", "UPDATED", "INPUT", "NOTE"],
            rows.map((i) => [
              i.id,
              i.pipeline,
              i.step,
              i.state,
              iso(i.updatedAt),
              short(JSON.parse(i.input)),
              i.stuck?.sentence ?? "",
            ]),
          ),
        );
      });
    });

  const item = program.command("item").description("add, move, close or archive a dispatch item");
  item
    .command("add")
    .description("add an item to a pipeline of the dispatch configuration")
    .argument("<pipeline>", "pipeline name")
    .argument("<json>", "the item's input")
    .option("--config <file>", `dispatch configuration (default ${DEFAULT_DISPATCH_CONFIG})`)
    .action(async (name: string, text: string, o: { config?: string }, cmd: Command) => {
      const input = JSON.stringify(parseJson(text, "the item's input"));
      const spec = readDispatchConfig(o.config ?? DEFAULT_DISPATCH_CONFIG).pipelines.find(
        (p) => p.name === name,
      );
      if (!spec) throw new UsageError(`the dispatch configuration has no pipeline "${name}"`);
      const pipeline = definePipeline(spec);
      await withSession(cmd, {}, async (s) => {
        const added = await opsOf(s).addItem(pipeline.name, pipeline.start, input);
        if (s.json) return printJson(added);
        print(added.id);
      });
    });

  item
    .command("close")
    .description("close an item; its live attempts close (item-closed) and their sessions are stopped")
    .argument("<id>", "item id")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const r = await opsOf(s).closeItem(id);
        if (!r) throw new UsageError(`item ${id} is not open or running`);
        if (s.json) return printJson(r);
        print(`item ${id} closed; closing attempts: ${r.closing.join(", ") || "none"}`);
      });
    });

  registerStuckItemCommands(item);

  item
    .command("archive")
    .description("archive a done or closed item (it leaves the board; its kept session is forgotten)")
    .argument("<id>", "item id")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const r = await opsOf(s).archiveItem(id);
        if (!r) throw new UsageError(`item ${id} is not done or closed`);
        if (s.json) return printJson(r);
        print(`item ${id} archived`);
      });
    });
}

/**
 * `item why` and `item move` (spec §20.30): an open item at a step its pipeline no longer has is
 * skipped by every runner; these say so and move it to a step the pipeline has.
 */
function registerStuckItemCommands(item: Command): void {
  item
    .command("why")
    .description("why an item is where it is: whether it is stuck at a step its pipeline no longer has")
    .argument("<id>", "item id")
    .option("--config <file>", `dispatch configuration (default ${DEFAULT_DISPATCH_CONFIG})`)
    .action(async (id: string, o: { config?: string }, cmd: Command) => {
      const pipelines = configuredPipelines(o.config ?? DEFAULT_DISPATCH_CONFIG)!;
      await withSession(cmd, { mustExist: true }, async (s) => {
        const it = await opsOf(s).getItem(id);
        if (!it) throw new UsageError(`there is no item ${id}`);
        const stuck = explainItemStuck(it, pipelines);
        const wait = await prWaitSentence(s, it);
        if (s.json) return printJson({ item: it, stuck, prWait: wait });
        print(
          `item ${it.id} (${it.pipeline}/${it.step}) is ${it.state}${stuck ? `: ${stuck.sentence}` : ""}${wait ? `: ${wait}` : ""}`,
        );
      });
    });

  item
    .command("move")
    .description(
      "move an open item to another step of its pipeline (e.g. one stuck at a step the pipeline no longer has)",
    )
    .argument("<id>", "item id")
    .argument("<step>", "a step of the item's pipeline in the dispatch configuration")
    .option("--config <file>", `dispatch configuration (default ${DEFAULT_DISPATCH_CONFIG})`)
    .action(async (id: string, step: string, o: { config?: string }, cmd: Command) => {
      const pipelines = configuredPipelines(o.config ?? DEFAULT_DISPATCH_CONFIG)!;
      await withSession(cmd, { mustExist: true }, async (s) => {
        const ops = opsOf(s);
        const it = await ops.getItem(id);
        if (!it) throw new UsageError(`there is no item ${id}`);
        if (it.state !== "open") throw new UsageError(`item ${id} is ${it.state}; only an open item moves`);
        const p = pipelines.get(it.pipeline);
        if (!p) throw new UsageError(`the dispatch configuration has no pipeline "${it.pipeline}"`);
        if (!p.steps.has(step))
          throw new UsageError(
            `pipeline "${p.name}" has no step "${step}" (its steps: ${[...p.steps.keys()].join(", ")})`,
          );
        // Guarded on the step read above (spec §20.30): a runner or operator that moved it first wins.
        const moved = await ops.moveItem(id, it.step, step);
        if (!moved)
          throw new UsageError(`item ${id} changed meanwhile (started, closed or moved); nothing moved`);
        if (s.json) return printJson(moved);
        print(`item ${id} moved from ${it.step} to ${step}`);
      });
    });
}

const ATTEMPT_STATES = [
  "starting",
  "reconciling",
  "running",
  "sleeping",
  "waking",
  "closing",
  "succeeded",
  "failed",
];

function registerAttemptCommands(program: Command): void {
  program
    .command("attempts")
    .description("list dispatch attempts (id order)")
    .option("--item <id>", "only attempts of this item")
    .option("--state <s>", `only attempts in this state (${ATTEMPT_STATES.join(", ")})`)
    .option("--live", "only live attempts")
    .option("--after <id>", "only attempts after this id")
    .option("--limit <n>", "at most this many (default 100, up to 1000)", limitOption)
    .action(
      async (
        o: { item?: string; state?: string; live?: boolean; after?: string; limit?: number },
        cmd: Command,
      ) => {
        const st = state(o, ATTEMPT_STATES);
        await withSession(cmd, { mustExist: true }, async (s) => {
          const list = await opsOf(s).listAttempts({
            itemId: o.item,
            state: st,
            live: o.live === true,
            after: o.after,
            limit: o.limit ?? 100,
          });
          if (s.json) return printJson(list);
          print(
            table(
              ["ID", "ITEM", "PHASE", "WORKER", "STATE", "SESSION", "CLAIMED"],
              list.map((a) => [
                a.id,
                a.itemId,
                a.phase,
                a.worker,
                a.forced ? `${a.state}:${a.forced}` : a.state,
                a.session ?? "-",
                iso(a.claimedAt),
              ]),
            ),
          );
        });
      },
    );

  program
    .command("attempt")
    .description("an attempt and its timeline of readings, decisions and moves")
    .argument("<id>", "attempt id")
    .option("--limit <n>", "at most this many events (default 1000)", limitOption)
    .action(async (id: string, o: { limit?: number }, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const ops = opsOf(s);
        const attempt = await ops.getAttempt(id);
        if (!attempt) throw new UsageError(`there is no attempt ${id}`);
        const events = await ops.events(id, 0, o.limit ?? 1_000);
        if (s.json) return printJson({ attempt, events });
        print(
          pairs([
            ["attempt", attempt.id],
            ["item", attempt.itemId],
            ["phase", `${attempt.pipeline}/${attempt.phase}`],
            ["state", attempt.forced ? `${attempt.state} (${attempt.forced})` : attempt.state],
            ["session", attempt.session ?? "-"],
            ["claimed", iso(attempt.claimedAt)],
            ["ended", iso(attempt.endedAt)],
          ]),
        );
        for (const e of events) print(`${iso(e.at)}  ${e.kind}  ${short(e.detail, 160)}`);
      });
    });
}
