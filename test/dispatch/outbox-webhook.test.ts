/**
 * The shipped sinks and notifiers against real receivers (spec §21.14–§21.16): a local HTTP receiver
 * on 127.0.0.1 that verifies every request with the `standardwebhooks` verifier, secret rotation,
 * status handling, secrets kept out of every text; the file and stdout sinks.
 */

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import { noticeOf, noticeSink, WebhookNotifier } from "../../src/dispatch/outbox/notices.js";
import { BATCH_TYPE, FileSink, StdoutSink, WebhookSink } from "../../src/dispatch/outbox/sinks.js";
import { type Batch, DeliveryError, type Fact } from "../../src/dispatch/outbox/types.js";

const OLD = `whsec_${Buffer.from("old-secret-0123456789abcdef").toString("base64")}`;
const NEW = `whsec_${Buffer.from("new-secret-fedcba9876543210").toString("base64")}`;

interface Received {
  headers: Record<string, string>;
  body: string;
  verifiedBy: string[];
}

/** A receiver that answers with `reply` and records each request and which secrets verify it. */
class Receiver {
  readonly got: Received[] = [];
  reply: (res: ServerResponse) => void = (res) => res.writeHead(204).end();
  server!: Server;
  url = "";
  async start(): Promise<this> {
    this.server = createServer((req: IncomingMessage, res) => {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (c: string) => {
        body += c;
      });
      req.on("end", () => {
        const headers = req.headers as Record<string, string>;
        const verifiedBy = [["old", OLD] as const, ["new", NEW] as const]
          .filter(([, s]) => {
            try {
              new Webhook(s).verify(body, headers);
              return true;
            } catch {
              return false;
            }
          })
          .map(([n]) => n);
        this.got.push({ headers, body, verifiedBy });
        this.reply(res);
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }
  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

const fact = (seq: number, type = "attempt.moved", data: unknown = { n: seq }): Fact => ({
  id: `fact_${seq}`,
  seq: String(seq),
  type,
  subject: `attempt:${seq}`,
  at: 1_700_000_000_000 + seq,
  data,
});
const batch = (...facts: Fact[]): Batch => ({
  destination: "hook",
  id: `hook:${facts[0]!.seq}-${facts.at(-1)!.seq}`,
  facts,
});
const signal = () => AbortSignal.timeout(10_000);

async function failure(p: Promise<unknown>): Promise<DeliveryError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DeliveryError) return e;
    throw e;
  }
  throw new Error("expected a DeliveryError");
}

describe("outbox sinks", () => {
  let rx: Receiver;
  const dirs: string[] = [];
  afterEach(async () => {
    await rx?.stop();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("§21.14 a batch is one Standard Webhooks message, webhook-id the batch id, verified by the standardwebhooks verifier", async () => {
    rx = await new Receiver().start();
    const sink = new WebhookSink({ url: rx.url, secrets: [OLD] });
    const b = batch(fact(1), fact(2));
    await sink.deliver(b, signal());
    await sink.deliver(b, signal()); // a redelivery: same id
    expect(rx.got).toHaveLength(2);
    const [first, again] = rx.got;
    expect(first!.verifiedBy).toEqual(["old"]);
    expect(first!.headers["webhook-id"]).toBe("hook:1-2");
    expect(again!.headers["webhook-id"]).toBe("hook:1-2");
    expect(first!.headers["content-type"]).toBe("application/json");
    const body = JSON.parse(first!.body);
    expect(body).toMatchObject({ type: BATCH_TYPE, data: { destination: "hook", batch: "hook:1-2" } });
    expect(body.data.facts).toEqual(b.facts);
    expect(Math.abs(Number(first!.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(60);
  });

  it("§21.14 during a secret rotation both secrets sign: a receiver holding either one verifies", async () => {
    rx = await new Receiver().start();
    await new WebhookSink({ url: rx.url, secrets: [NEW, OLD] }).deliver(batch(fact(3)), signal());
    await new WebhookSink({ url: rx.url, secrets: [NEW] }).deliver(batch(fact(4)), signal());
    expect(rx.got.map((g) => g.verifiedBy)).toEqual([["old", "new"], ["new"]]);
    expect(rx.got[0]!.headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    // A tampered body verifies with neither.
    const h = rx.got[1]!.headers;
    expect(() => new Webhook(NEW).verify(`${rx.got[1]!.body} `, h)).toThrow();
  });

  it("§21.14 5xx, 408, 409, 425 and 429 are retried (Retry-After honoured); other 4xx and 3xx are not", async () => {
    rx = await new Receiver().start();
    const sink = new WebhookSink({ url: rx.url, secrets: [OLD] });
    const cases: Array<[number, boolean]> = [
      [500, true],
      [503, true],
      [408, true],
      [409, true],
      [425, true],
      [429, true],
      [400, false],
      [401, false],
      [404, false],
      [410, false],
      [422, false],
      [301, false],
    ];
    for (const [status, retryable] of cases) {
      rx.reply = (res) =>
        res.writeHead(status, status === 301 ? { location: "http://127.0.0.1:1/" } : {}).end("no");
      const e = await failure(sink.deliver(batch(fact(1)), signal()));
      expect([status, e.retryable]).toEqual([status, retryable]);
      expect(e.message).toContain(`HTTP ${status}`);
    }
    rx.reply = (res) => res.writeHead(429, { "retry-after": "17" }).end();
    expect((await failure(sink.deliver(batch(fact(1)), signal()))).retryAfterMs).toBe(17_000);
    rx.reply = (res) => res.writeHead(503, { "retry-after-ms": "250" }).end();
    expect((await failure(sink.deliver(batch(fact(1)), signal()))).retryAfterMs).toBe(250);
  });

  it("§21.9 §21.14 a receiver that does not answer in time fails retryable; a refused connection too", async () => {
    rx = await new Receiver().start();
    rx.reply = () => {}; // never answers
    const sink = new WebhookSink({ url: rx.url, secrets: [OLD] });
    const e = await failure(sink.deliver(batch(fact(1)), AbortSignal.timeout(200)));
    expect(e.retryable).toBe(true);
    const port = (rx.server.address() as AddressInfo).port;
    await rx.stop();
    const closed = new WebhookSink({ url: `http://127.0.0.1:${port}/hook`, secrets: [OLD] });
    expect((await failure(closed.deliver(batch(fact(1)), signal()))).retryable).toBe(true);
    rx = await new Receiver().start();
  });

  it("§21.14 secrets and the URL's credentials and query never appear in errors, JSON or bad-config messages", async () => {
    rx = await new Receiver().start();
    rx.reply = (res) => res.writeHead(500).end("boom");
    const url = `${rx.url.replace("http://", "http://user:pa55word@")}?token=sekrit-token`;
    const sink = new WebhookSink({ url, secrets: [OLD, NEW] });
    const e = await failure(sink.deliver(batch(fact(1)), signal()));
    const texts = [e.message, JSON.stringify(sink), String(e.stack), sink.target];
    const notifier = new WebhookNotifier({ url, secrets: [OLD] });
    texts.push(JSON.stringify(notifier));
    for (const bad of [["whsec_!!notbase64"], [], ["x", "y", "z", "a", "b", "c", "d", "e", "f", "g", "h"]]) {
      try {
        new WebhookSink({ url, secrets: bad });
        throw new Error("accepted");
      } catch (err) {
        expect((err as { code?: string }).code).toBe("RATCHET_CONFIG");
        texts.push((err as Error).message);
      }
    }
    for (const t of texts)
      for (const secret of [OLD, NEW, OLD.slice(6), "pa55word", "sekrit-token", "whsec_!!notbase64"])
        expect(t).not.toContain(secret);
    expect(sink.target).toBe(`${rx.url}`);
    // The URL's credentials travel as a Basic authorization header, its query as given.
    expect(rx.got[0]!.headers.authorization).toBe(`Basic ${Buffer.from("user:pa55word").toString("base64")}`);
  });

  it("§21.15 the file sink appends one JSON line per fact and has synced them when it resolves; stdout writes the same lines", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-outbox-file-"));
    dirs.push(dir);
    const path = join(dir, "facts.jsonl");
    const sink = new FileSink({ path });
    await sink.deliver(batch(fact(1), fact(2)), signal());
    await sink.deliver(batch(fact(3)), signal());
    const lines = readFileSync(path, "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.id)).toEqual(["fact_1", "fact_2", "fact_3"]);
    await sink.close();
    await new FileSink({ path }).deliver(batch(fact(4)), signal());
    expect(readFileSync(path, "utf8").trimEnd().split("\n")).toHaveLength(4);
    const bad = new FileSink({ path: join(dir, "no", "such", "dir", "x.jsonl") });
    expect((await failure(bad.deliver(batch(fact(1)), signal()))).retryable).toBe(true);
    const out = new PassThrough();
    let text = "";
    out.on("data", (c) => {
      text += String(c);
    });
    await new StdoutSink({ stream: out }).deliver(batch(fact(5), fact(6)), signal());
    expect(
      text
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l).seq),
    ).toEqual(["5", "6"]);
  });

  it("§21.16 notice facts become notices; the webhook notifier sends each signed, its id the fact's id; other facts are ignored", async () => {
    rx = await new Receiver().start();
    const n = fact(9, "notice.usage-limit", {
      title: "attempt 9 hit a usage limit",
      attempt: "9",
      resetsAt: 5,
    });
    expect(noticeOf(n)).toMatchObject({
      id: "fact_9",
      kind: "usage-limit",
      title: "attempt 9 hit a usage limit",
    });
    expect(noticeOf(fact(1))).toBeNull();
    expect(noticeOf(fact(2, "notice.unknown-kind"))).toBeNull();
    const sink = noticeSink(new WebhookNotifier({ url: rx.url, secrets: [OLD] }));
    await sink.deliver(batch(fact(1), n, fact(10, "notice.stalled", { title: "stalled" })), signal());
    expect(rx.got.map((g) => [g.headers["webhook-id"], JSON.parse(g.body).type, g.verifiedBy])).toEqual([
      ["fact_9", "ratchet.notice.usage-limit", ["old"]],
      ["fact_10", "ratchet.notice.stalled", ["old"]],
    ]);
    expect(JSON.parse(rx.got[0]!.body).data.body).toContain("resetsAt: 5");
  });
});
