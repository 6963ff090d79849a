/**
 * Pull-request commands (spec §22.8): `ratchet prs [--item ID] [--attempt ID]`
 * lists linked pull requests with their last known state and checks, and
 * `ratchet pr link ATTEMPT URL` links one to an attempt by hand (idempotent).
 * Both take --json. Nothing here calls a forge or reads a token.
 */
import { existsSync } from "node:fs";
import type { Command } from "commander";
import { DEFAULT_FORGE_HOST, parsePullUrl } from "../../core/dispatch/links.js";
import { DEFAULT_DISPATCH_CONFIG, readDispatchConfig } from "../../dispatch/config.js";
import { forgeConfigsOf } from "../../dispatch/forge/config.js";
import { type PullRow, pullOps } from "../../store/pulls/ops.js";
import { option, parseInteger, UsageError } from "../args.js";
import { iso, print, printJson, table } from "../format.js";
import { withSession } from "../session.js";
import { opsOf } from "./dispatch.js";

/** The forge hosts a manual link may name: the configuration's, else github.com. */
function hostsOf(file: string | undefined): string[] {
  const path = file ?? DEFAULT_DISPATCH_CONFIG;
  if (file === undefined && !existsSync(path)) return [DEFAULT_FORGE_HOST];
  const c = readDispatchConfig(path);
  const forges = forgeConfigsOf(c.dir, c.forge);
  return forges.length > 0 ? forges.map((f) => f.host!) : [DEFAULT_FORGE_HOST];
}

function row(p: PullRow): string[] {
  return [
    p.id,
    p.url,
    p.state ?? "-",
    p.checks ?? "-",
    p.draft ? "draft" : "",
    p.links.map((l) => `${l.attemptId}/${l.itemId}`).join(","),
    iso(p.checkedAt),
    p.final ? "-" : iso(p.nextCheckAt),
    p.lastError ?? "",
  ];
}

export function registerPullRequests(program: Command): void {
  program
    .command("prs")
    .description("linked pull requests, their state and checks (spec §22.8)")
    .option("--item <id>", "only those of this item")
    .option("--attempt <id>", "only those of this attempt")
    .option("--after <id>", "pull requests after this id (paging)")
    .option(
      "--limit <n>",
      "at most this many (1–1000, default 100)",
      option((t) => parseInteger(t, "--limit", 1, 1_000)),
    )
    .action(async (o: { item?: string; attempt?: string; after?: string; limit?: number }, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const list = await pullOps({ dispatch: opsOf(s), now: () => s.ratchet.store.now() }).list({
          itemId: o.item ?? null,
          attemptId: o.attempt ?? null,
          after: o.after ?? null,
          limit: o.limit ?? 100,
        });
        if (s.json) return printJson(list);
        print(
          table(
            ["ID", "URL", "STATE", "CHECKS", "DRAFT", "ATTEMPT/ITEM", "CHECKED", "NEXT", "ERROR"],
            list.map(row),
          ),
        );
      });
    });
  program
    .command("pr")
    .description("link a pull request to an attempt (spec §22.8)")
    .command("link")
    .description("link a pull-request URL to an attempt by hand (idempotent)")
    .argument("<attempt>", "attempt id")
    .argument("<url>", "the pull request's URL, e.g. https://github.com/OWNER/REPO/pull/N")
    .option(
      "--config <file>",
      `dispatch configuration, for its forge hosts (default ${DEFAULT_DISPATCH_CONFIG})`,
    )
    .action(async (attempt: string, url: string, o: { config?: string }, cmd: Command) => {
      const found = parsePullUrl(url, hostsOf(o.config));
      if (!found)
        throw new UsageError(`"${url.slice(0, 200)}" is not a pull-request URL of a configured forge host`);
      await withSession(cmd, { mustExist: true }, async (s) => {
        const r = await pullOps({ dispatch: opsOf(s), now: () => s.ratchet.store.now() }).link(
          attempt,
          found,
          "manual",
        );
        if (!r) throw new UsageError(`there is no attempt ${attempt}`);
        if (s.json) return printJson(r);
        print(
          `${r.created ? "linked" : "already linked"}: ${r.pull.url} (pull request ${r.pull.id}) to attempt ${attempt}`,
        );
      });
    });
}
