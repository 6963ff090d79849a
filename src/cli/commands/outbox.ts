/**
 * Outbox commands (spec §21.11–§21.13): `ratchet outbox [--status]` (each
 * destination's status and lag), `ratchet outbox retry DEST`, `ratchet outbox
 * remove DEST`, and `ratchet outbox send` (a sender for the config file's
 * destinations until SIGINT/SIGTERM). Every command takes --json.
 */
import type { Command } from "commander";
import { DEFAULT_DISPATCH_CONFIG, readDispatchConfig } from "../../dispatch/config.js";
import { outboxOptionsOf } from "../../dispatch/outbox/config.js";
import { OutboxSender } from "../../dispatch/outbox/sender.js";
import { outboxStatus } from "../../dispatch/outbox/status.js";
import { ConfigError, NotFoundError } from "../../errors.js";
import type { Store } from "../../store/store.js";
import { iso, print, printJson, short, table } from "../format.js";
import { nextSignal, withSession } from "../session.js";

/** A sender for the config's destinations, or null when it names none (spec §21.5). */
export function senderOf(file: string, store: Store): OutboxSender | null {
  const c = readDispatchConfig(file);
  const o = outboxOptionsOf(c, c.dir);
  if (!o || o.destinations.length === 0) return null;
  return new OutboxSender({ ...o, store, onError: (e) => print(`outbox: ${(e as Error).message}`) });
}

function statusLine(d: Awaited<ReturnType<typeof outboxStatus>>["destinations"][number]): string[] {
  const since = d.state === "ok" ? "" : iso(d.since);
  return [
    d.name,
    d.state,
    d.cursor,
    String(d.lagFacts),
    d.lagSeconds.toFixed(1),
    since,
    String(d.failures),
    short(d.lastError ?? "", 60),
  ];
}

export function registerOutbox(program: Command): void {
  const outbox = program
    .command("outbox")
    .description("the outbox's destinations: status, lag, retry, send (spec §21)")
    .option("--status", "show each destination's status and lag (the default)")
    .action(async (_o: unknown, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const st = await outboxStatus(s.ratchet.store.outbox);
        if (s.json) return printJson(st);
        if (st.destinations.length === 0) return print("no destinations yet (a sender registers them)");
        print(
          table(
            ["DESTINATION", "STATE", "CURSOR", "LAG", "LAG_S", "SINCE", "FAILURES", "LAST ERROR"],
            st.destinations.map(statusLine),
          ),
        );
      });
    });

  outbox
    .command("retry")
    .description("try a dead-lettered or retrying destination again now (spec §21.11)")
    .argument("<destination>", "destination name")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const d = await s.ratchet.store.outbox.retry(name);
        if (!d) throw new NotFoundError(`outbox destination "${name}"`);
        if (s.json) return printJson(d);
        print(`${d.name} is ${d.state}: its next sender pass tries batch after seq ${d.cursor} at once`);
      });
    });

  outbox
    .command("remove")
    .description("forget a destination, so it no longer holds facts back from the prune (spec §21.13)")
    .argument("<destination>", "destination name")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        if (!(await s.ratchet.store.outbox.removeDestination(name)))
          throw new NotFoundError(`outbox destination "${name}"`);
        if (s.json) return printJson({ removed: name });
        print(`removed ${name}`);
      });
    });

  outbox
    .command("send")
    .description(
      `deliver the config's destinations until SIGINT/SIGTERM (config: --config or ${DEFAULT_DISPATCH_CONFIG})`,
    )
    .option("--config <file>", 'dispatch configuration (JSON) with an "outbox" section')
    .option("--once", "one pass over every destination, then exit")
    .action(async (o: { config?: string; once?: boolean }, cmd: Command) => {
      await withSession(cmd, {}, async (s) => {
        const sender = senderOf(o.config ?? DEFAULT_DISPATCH_CONFIG, s.ratchet.store);
        if (!sender) throw new ConfigError('the config has no "outbox" destinations');
        if (o.once) {
          const r = await sender.runOnce();
          await sender.stop();
          return s.json
            ? printJson(r)
            : print(`${r.facts} facts in ${r.batches} batches, ${r.failures} failures`);
        }
        if (!s.json)
          print(`sending to ${sender.destinations.map((d) => d.name).join(", ")} as ${sender.holder}`);
        sender.start();
        await nextSignal();
        await sender.stop();
      });
    });
}
