/**
 * spec §21.7, §21.8, §21.18: an outbox sender process is SIGKILLed while its batch is in flight (the
 * receiver has the request and has not answered). A second sender process takes the destination
 * over once the dead one's lease lapsed and delivers from the cursor: every fact arrives at least
 * once, the accepted deliveries are in seq order, and a redelivered fact and batch keep their ids.
 * The receiver verifies every request with the standardwebhooks verifier. SQLite and PostgreSQL.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { dropSchemas, pgGate } from "../pg-available.js";
import { FixtureProcess, Sandbox, waitUntil } from "./harness.js";
import { openSharedStore } from "./shared-store.js";

const FIXTURE = join(
  resolve(dirname(fileURLToPath(import.meta.url)), "../.."),
  "test/fixtures/outbox-sender.ts",
);
const SECRET = `whsec_${Buffer.from("sigkill-secret-0123456789").toString("base64")}`;

interface Delivery {
  webhookId: string;
  ids: string[];
  seqs: number[];
  answered: boolean;
}

describe.each(["sqlite", "postgres"] as const)(
  "SIGKILL of an outbox sender mid-batch on %s (spec §21.18)",
  (backend) => {
    let sb: Sandbox;
    let store: SqliteStore | PostgresStore;
    let where: string;
    let server: Server;
    let url: string;
    let children: FixtureProcess[];
    const deliveries: Delivery[] = [];
    let hangNext = true;
    const schemas: string[] = [];
    if (backend === "postgres" && !pgGate(it)) return;

    beforeEach(async () => {
      sb = new Sandbox();
      children = [];
      deliveries.length = 0;
      hangNext = true;
      ({ store, where } = await openSharedStore(backend, sb, schemas));
      server = createServer((req, res) => {
        let body = "";
        req.setEncoding("utf8");
        req.on("data", (c: string) => {
          body += c;
        });
        req.on("end", () => {
          new Webhook(SECRET).verify(body, req.headers as Record<string, string>); // throws on a bad signature
          const facts = JSON.parse(body).data.facts as { id: string; seq: string }[];
          const d: Delivery = {
            webhookId: String(req.headers["webhook-id"]),
            ids: facts.map((f) => f.id),
            seqs: facts.map((f) => Number(f.seq)),
            answered: !hangNext,
          };
          deliveries.push(d);
          if (hangNext) {
            hangNext = false; // the first request is left unanswered: its sender dies holding it
            return;
          }
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    });

    afterAll(async () => {
      await dropSchemas(schemas);
    });

    afterEach(async () => {
      for (const c of children) c.kill("SIGKILL");
      await Promise.all(children.map((c) => c.exited));
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await store.close();
      await sb.cleanup();
    });

    it("§21.18 every fact arrives at least once, in order, with stable ids, after the second sender takes over", async () => {
      const n = 23;
      await store.outbox.append(
        Array.from({ length: n }, (_, i) => ({ type: "t.fact", subject: `s:${i}`, data: { i } })),
      );
      const first = new FixtureProcess([where, url, SECRET], FIXTURE);
      children.push(first);
      await first.waitFor("ready", 60_000);
      await waitUntil("the first sender's request", () => deliveries.length >= 1, 60_000);
      first.kill("SIGKILL");
      expect((await first.exited).signal).toBe("SIGKILL");
      const hung = deliveries[0]!;
      const second = new FixtureProcess([where, url, SECRET], FIXTURE);
      children.push(second);
      const all = (await store.outbox.facts("0", 100)).map((f) => f.id);
      await waitUntil(
        "every fact delivered",
        () => new Set(deliveries.filter((d) => d.answered).flatMap((d) => d.ids)).size === n,
        60_000,
      );
      const accepted = deliveries.filter((d) => d.answered);
      // Stable ids: the in-flight batch came again with the same fact ids and the same webhook-id.
      expect(accepted[0]!.ids).toEqual(hung.ids);
      expect(accepted[0]!.webhookId).toBe(hung.webhookId);
      // In order: the accepted deliveries' seqs ascend strictly across batches.
      const seqs = accepted.flatMap((d) => d.seqs);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      expect(new Set(seqs).size).toBe(seqs.length);
      expect(accepted.flatMap((d) => d.ids)).toEqual(all);
      for (const d of deliveries) expect(d.ids.length).toBeLessThanOrEqual(5);
      await waitUntil(
        "the cursor at the last fact",
        async () => (await store.outbox.destinations())[0]?.cursor === String(seqs.at(-1)),
        60_000,
      );
    }, 240_000);
  },
);
