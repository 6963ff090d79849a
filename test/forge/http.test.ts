/** The read-only pull-request routes (spec §22.9, §22.10) over a real socket, on SQLite and PostgreSQL. */
import { expect, it } from "vitest";
import { findPullUrls } from "../../src/core/dispatch/links.js";
import { started } from "../../src/dispatch/testing/store-kit.js";
import type { DispatchCapable } from "../../src/store/dispatch/ops.js";
import { pullOps } from "../../src/store/pulls/ops.js";
import { FakeClock, forEachBackend, openRatchet } from "../engine/helpers.js";
import { errorOf, startServer, TOKEN } from "../server/kit.js";

forEachBackend(() => {
  it("§22.9 GET /api/dispatch/prs lists linked pull requests, by item or attempt; /prs/{id} reads one", async () => {
    const clock = new FakeClock();
    const r = await openRatchet([], { clock });
    const { call } = await startServer(r, { token: TOKEN, dashboard: false });
    const store = r.store as unknown as DispatchCapable;
    const s = await started(store.dispatch);
    const item = s.item;
    const url = "https://github.com/acme/widgets/pull/7";
    const linked = await pullOps(store).link(s.attempt.id, findPullUrls(url)[0]!, "url");
    const list = (await (await call(`/api/dispatch/prs?item=${item.id}`)).json()) as {
      prs: { id: string; url: string }[];
    };
    expect(list.prs.map((p) => p.url)).toEqual([url]);
    expect(((await (await call("/api/dispatch/prs?item=999")).json()) as { prs: unknown[] }).prs).toEqual([]);
    const one = (await (await call(`/api/dispatch/prs/${linked!.pull.id}`)).json()) as {
      pr: { links: unknown[] };
    };
    expect(one.pr.links).toHaveLength(1);
    expect((await errorOf(await call("/api/dispatch/prs/999"))).status).toBe(404);
    expect((await errorOf(await call("/api/dispatch/prs?limit=0"))).status).toBe(400);
    expect((await call("/api/dispatch/prs", { token: null })).status).toBe(401);
  });
});
