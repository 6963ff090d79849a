/**
 * A worker process of the side-by-side benchmark (compare.ts forks it; the issue asks for workers
 * in separate processes). It loads one engine, then waits for `start`: opens its own connection to
 * the run's store (the engine's `startWorker`), runs the no-op handler, and tells the driver how many
 * distinct sequence numbers it has seen. On `stop` it stops the worker and sends back every
 * sequence number's count, the latencies (W3) and its RSS (W6), then exits.
 *
 * Protocol (IPC messages, see procs.ts for the driver's side):
 *   driver → worker   { type: "start", concurrency, n, latency }     { type: "stop" }
 *   worker → driver   { type: "loaded" }   { type: "started" }   { type: "count", distinct }
 *                     { type: "done", seen (base64 Uint16Array), early, latencies, rssStartMB, rssPeakMB }
 *                     { type: "error", message }
 *
 * Counts are sent from the handler every 256 jobs or 5 ms, and by a 2 ms timer when the handler has
 * gone quiet (plainjob's loop starves timers while jobs remain), so the driver learns of the last
 * job within about 2 ms.
 */
import { performance } from "node:perf_hooks";
import type { Payload, RunningWorker, StoreRef, Targets } from "./adapter.js";
import { QUEUE_ENGINES } from "./engines.js";

interface Start {
  type: "start";
  concurrency: number;
  n: number;
  latency: boolean;
}

const [key, targetsJson, refJson] = process.argv.slice(2) as [string, string, string];
const targets = JSON.parse(targetsJson) as Targets;
const ref = JSON.parse(refJson) as StoreRef;

function send(m: unknown): void {
  process.send?.(m);
}

function fail(e: unknown): never {
  send({ type: "error", message: e instanceof Error ? (e.stack ?? e.message) : String(e) });
  process.exit(1);
}

process.on("uncaughtException", fail);
process.on("unhandledRejection", fail);
// The driver going away (killed, crashed) ends the worker too.
process.on("disconnect", () => process.exit(0));

const entry = QUEUE_ENGINES[key];
if (!entry) fail(new Error(`unknown engine ${key}`));
const engine = await entry.load();
send({ type: "loaded" });

let running: RunningWorker | undefined;
let seen = new Uint16Array(0);
let distinct = 0;
let early = 0;
let sentDistinct = 0;
let sinceSent = 0;
let lastSent = 0;
const latencies: number[] = [];
let rssStart = 0;
let rssPeak = 0;
let lastRss = 0;
let timer: NodeJS.Timeout | undefined;

const sampleRss = () => {
  const v = process.memoryUsage.rss();
  if (v > rssPeak) rssPeak = v;
};
const report = () => {
  sentDistinct = distinct;
  sinceSent = 0;
  lastSent = performance.now();
  send({ type: "count", distinct });
};

async function start(m: Start): Promise<void> {
  seen = new Uint16Array(m.n);
  rssStart = process.memoryUsage.rss();
  rssPeak = rssStart;
  timer = setInterval(() => {
    if (distinct !== sentDistinct) report();
    const now = performance.now();
    if (now - lastRss >= 50) {
      lastRss = now;
      sampleRss();
    }
  }, 2);
  running = await engine.startWorker(targets, ref, {
    concurrency: m.concurrency,
    onJob(p: Payload) {
      const now = performance.now();
      if (m.latency) latencies.push(performance.timeOrigin + now - p.enqueuedAt);
      const s = p.seq;
      if (s < 0 || s >= m.n) early++;
      else if (seen[s]!++ === 0) distinct++;
      if (now - lastRss >= 50) {
        lastRss = now;
        sampleRss();
      }
      if (++sinceSent >= 256 || now - lastSent >= 5) report();
    },
  });
  send({ type: "started" });
}

async function stop(): Promise<void> {
  await running?.stop();
  clearInterval(timer);
  sampleRss();
  // Exit once the message is written: an engine that keeps a handle open (a pool, a timer) must
  // not keep the process.
  process.send?.(
    {
      type: "done",
      seen: Buffer.from(seen.buffer, seen.byteOffset, seen.byteLength).toString("base64"),
      early,
      latencies,
      rssStartMB: rssStart / 2 ** 20,
      rssPeakMB: rssPeak / 2 ** 20,
    },
    () => process.exit(0),
  );
}

process.on("message", (m: { type: string }) => {
  if (m.type === "start") start(m as Start).catch(fail);
  else if (m.type === "stop") stop().catch(fail);
});
