/**
 * `ratchet usage [--conversation ID] [--since T] [--json]` and `ratchet providers [--json]`
 * (spec §18.9): the usage ledger's totals, overall and per provider and model, and the circuit
 * breakers with their states. `--since` takes an ISO time or a duration back from now (`24h`).
 */
import type { Command } from "commander";
import { option, parseDuration, UsageError } from "../args.js";
import { iso, pairs, print, printJson, table } from "../format.js";
import { withSession } from "../session.js";

/** An ISO date-time, or a duration meaning that long ago. */
export function parseSince(text: string, now: number = Date.now()): number {
  const t = text.trim();
  if (/^\d+(\.\d+)?(ms|s|m|h|d)$/.test(t)) return now - parseDuration(t);
  const at = Date.parse(t);
  if (!/^\d{4}-\d{2}-\d{2}/.test(t) || !Number.isFinite(at))
    throw new UsageError(
      `--since "${text}" is neither an ISO time (2026-01-31T12:00:00Z) nor a duration (24h)`,
    );
  return at;
}

const usd = (n: number) => `$${n.toFixed(6)}`;

export function registerModels(program: Command): void {
  program
    .command("usage")
    .description("model usage and cost from the usage ledger (totals, and per provider and model)")
    .option("--conversation <id>", "only this conversation")
    .option(
      "--since <time>",
      "only rows since an ISO time or a duration ago (24h)",
      option((t) => parseSince(t)),
    )
    .action(async (o: { conversation?: string; since?: number }, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const filter = {
          ...(o.conversation !== undefined ? { conversationId: o.conversation } : {}),
          ...(o.since !== undefined ? { since: o.since } : {}),
        };
        const totals = await s.ratchet.store.usage.usageTotals(filter);
        const byModel = await s.ratchet.store.usage.usageByModel(filter);
        if (s.json) return printJson({ totals, byModel });
        print(
          pairs([
            ["responses", String(totals.responses)],
            ["failed (billed)", String(totals.failed)],
            ["input tokens", String(totals.input)],
            ["cached tokens", String(totals.cached)],
            ["output tokens", String(totals.output)],
            ["reasoning tokens", String(totals.reasoning)],
            ["cost", usd(totals.cost)],
          ]),
        );
        if (byModel.length > 0)
          print(
            table(
              ["provider", "model", "responses", "failed", "input", "output", "cost"],
              byModel.map((m) => [
                m.provider,
                m.model,
                String(m.responses),
                String(m.failed),
                String(m.input),
                String(m.output),
                usd(m.cost),
              ]),
            ),
          );
      });
    });

  program
    .command("providers")
    .description("circuit breakers per provider and model, shared by every worker (closed, open, half_open)")
    .action(async (_o: unknown, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const list = await s.ratchet.store.breakers.listBreakers();
        if (s.json) return printJson(list);
        if (list.length === 0) return print("no breaker has seen a failure: every provider is closed");
        print(
          table(
            ["provider/model", "state", "failures", "opened", "updated"],
            list.map((b) => [
              b.key,
              b.state,
              String(b.failures),
              b.state === "closed" ? "-" : iso(b.openedAt),
              iso(b.updatedAt),
            ]),
          ),
        );
      });
    });
}
