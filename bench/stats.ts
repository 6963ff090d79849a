/** Number formatting and summary statistics shared by every benchmark driver. */
import { readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";

export const fmtInt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const fmt1 = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/** Whole numbers from 100 up, one decimal below. */
export const fmt = (v: number): string => (Math.abs(v) >= 100 ? fmtInt.format(v) : fmt1.format(v));
/** A count, with thousands separators. */
export const n = (v: number): string => fmtInt.format(v);

export function progress(msg: string): void {
  process.stderr.write(`${msg}\n`);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Nearest-rank percentile (p in 0–100) of an ascending array; NaN when empty. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** CPU time (user + system) of the processes whose /proc/<pid>/stat passes `pick`, in ms (clock ticks of 10 ms). */
function cpuMsWhere(pids: Iterable<string>, pick: (stat: string) => boolean): number {
  let ticks = 0;
  for (const p of pids) {
    try {
      const st = readFileSync(`/proc/${p}/stat`, "utf8");
      if (!pick(st)) continue;
      const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return ticks * 10;
}

/** CPU time of every process of this machine named `comm` (postgres, redis-server), in ms. */
export function serverCpuMs(comm: string): number {
  return cpuMsWhere(
    readdirSync("/proc").filter((p) => /^\d+$/.test(p)),
    (st) => st.includes(`(${comm})`),
  );
}

/** CPU time of every postgres process of this machine, in ms. */
export const postgresCpuMs = (): number => serverCpuMs("postgres");

/** CPU time of the given processes, in ms. */
export const processCpuMs = (pids: readonly number[]): number => cpuMsWhere(pids.map(String), () => true);

/**
 * This process's CPU time in ms, split into its main thread and every other thread (V8's optimizing
 * compiler and its GC helpers, libuv's pool): Linux, from /proc/self/task. A short drain in a fresh
 * process spends a large share of its CPU on the other threads while the JIT warms up.
 */
export function threadCpuMs(): { main: number; other: number } {
  const all = cpuMsWhere(
    readdirSync("/proc/self/task").map((t) => `self/task/${t}`),
    () => true,
  );
  const main = cpuMsWhere([`self/task/${process.pid}`], () => true);
  return { main, other: all - main };
}

/** The builds an A/B alternates: `--base`'s dist/ (when given) and this one's, by name. */
export function abBuilds(base: string | undefined, own: string): [string, string][] {
  return base
    ? [
        ["base", resolve(base)],
        ["this", own],
      ]
    : [["this", own]];
}

/** A figure with `d` decimals, or a dash where there is none. */
export const fixedOrDash = (x: number | null, d = 1): string => (x === null ? "–" : x.toFixed(d));

/**
 * The options of the scripts that run a fresh worker on PostgreSQL a few times (startup.ts,
 * backends.ts): how many tasks, how many runs, the server, and the child process's schema.
 */
export const PG_RUN_OPTIONS = {
  tasks: { type: "string", default: "20000" },
  runs: { type: "string", default: "3" },
  "pg-url": {
    type: "string",
    default: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  },
  child: { type: "string" },
} as const;

/** --tasks and --runs of PG_RUN_OPTIONS, checked: a multiple of 1,000 in [1000, 1000000], and [1, 20]. */
export function tasksAndRuns(tasks: string, runs: string): { N: number; RUNS: number } {
  const N = Number(tasks);
  const RUNS = Number(runs);
  if (!Number.isInteger(N) || N < 1_000 || N > 1_000_000 || N % 1_000 !== 0)
    throw new Error("--tasks must be a multiple of 1,000 in [1000, 1000000]");
  if (!Number.isInteger(RUNS) || RUNS < 1 || RUNS > 20) throw new Error("--runs must be in [1, 20]");
  return { N, RUNS };
}

/** The machine's CPU time so far from /proc/stat, in clock ticks: all of it, and the idle part (idle + iowait). */
export function machineTicks(): { total: number; idle: number } {
  const f = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { total, idle: f[3]! + f[4]! };
}
