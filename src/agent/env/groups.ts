/**
 * Finding and ending a process group a dead worker left behind (spec §19.30). `exec` runs each
 * command in a process group of its own (spec §19.3), so a SIGKILL of the worker does not reach it:
 * the group runs on, orphaned. What is recorded when the group starts — its id, the host's name and
 * boot id, and its leader's start time — is enough for a later attempt on the same host to find it
 * and to tell it from a group that merely reuses the number.
 *
 * Linux only (it reads /proc): elsewhere the record has no boot id and start time, and a reap says
 * `unverifiable` rather than kill a group it cannot identify.
 *
 * Invariant: a reap signals only a group whose members started no earlier than the recorded leader,
 * on the recorded host in the recorded boot, and never a group whose leader pid now belongs to a
 * process that started at another time (a recycled pid).
 */
import { readdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";

/** What identifies one process group an exec started (spec §19.30). */
export interface ProcessGroupRecord {
  /** The group id: the pid of its leader, the process exec spawned. */
  pgid: number;
  /** The host's name and its boot id (/proc/sys/kernel/random/boot_id); "" when unknown. */
  host: string;
  bootId: string;
  /** The leader's start time, in clock ticks since boot (field 22 of /proc/PID/stat); "" when unknown. */
  start: string;
}

/**
 * How a reap ended: `killed` (members were there and are gone now), `gone` (nothing of it was
 * left), `elsewhere` (another host: this one cannot reach it), `unverifiable` (the record lacks the
 * boot id or start time, so nothing was signalled).
 */
export type ReapOutcome = "killed" | "gone" | "elsewhere" | "unverifiable";

const KILL_GRACE_MS = 2_000;
const GONE_WAIT_MS = 5_000;
const POLL_MS = 20;

let bootIdOnce: string | undefined;

/** This host's name and boot id (the boot id is read once per process). */
export function hostIdentity(): { host: string; bootId: string } {
  if (bootIdOnce === undefined) {
    try {
      bootIdOnce = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    } catch {
      bootIdOnce = "";
    }
  }
  return { host: hostname(), bootId: bootIdOnce };
}

interface ProcStat {
  state: string;
  pgid: number;
  start: bigint;
}

/** Fields 3, 5 and 22 of /proc/PID/stat, or null when the process is not there. */
function statOf(pid: number | string): ProcStat | null {
  let s: string;
  try {
    s = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count from the last ")".
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  if (f.length < 20) return null;
  return { state: f[0]!, pgid: Number(f[2]), start: BigInt(f[19]!) };
}

/** The record of a group just spawned with leader `pid`. */
export function recordGroup(pid: number): ProcessGroupRecord {
  const { host, bootId } = hostIdentity();
  const st = statOf(pid);
  return { pgid: pid, host, bootId, start: st && bootId ? String(st.start) : "" };
}

/** Live (not zombie) members of the recorded group, per the invariant above. */
function members(rec: ProcessGroupRecord): number[] {
  const since = BigInt(rec.start);
  const leader = statOf(rec.pgid);
  // The leader's pid belongs to a process of another start time: the number was reused, and a pid
  // is not reused while a group of that id exists, so the recorded group is gone.
  if (leader && leader.start !== since) return [];
  const out: number[] = [];
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const st = statOf(name);
    if (st && st.pgid === rec.pgid && st.state !== "Z" && st.start >= since) out.push(Number(name));
  }
  return out;
}

async function goneWithin(rec: ProcessGroupRecord, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  for (;;) {
    if (members(rec).length === 0) return true;
    if (Date.now() >= until) return false;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

function signalGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // Already gone.
  }
}

/**
 * Ends the recorded group if it still runs on this host: SIGTERM, and SIGKILL 2 s later (as exec
 * does, spec §19.3); resolves when no member is left (or 5 s after the SIGKILL).
 */
export async function reapGroup(rec: ProcessGroupRecord): Promise<ReapOutcome> {
  if (!rec.bootId || !rec.start || !Number.isSafeInteger(rec.pgid) || rec.pgid <= 1) return "unverifiable";
  const here = hostIdentity();
  if (rec.host !== here.host) return "elsewhere";
  // Same host, another boot: every process of that boot is gone.
  if (rec.bootId !== here.bootId) return "gone";
  if (members(rec).length === 0) return "gone";
  signalGroup(rec.pgid, "SIGTERM");
  if (await goneWithin(rec, KILL_GRACE_MS)) return "killed";
  signalGroup(rec.pgid, "SIGKILL");
  await goneWithin(rec, GONE_WAIT_MS);
  return "killed";
}
