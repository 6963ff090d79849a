/**
 * Linking pull requests from a session's live output (spec §22.11): while
 * an attempt runs, at most once per `outputScanMs` (the store's clock), and
 * once more when it settles, the runner reads the last OUTPUT_SCAN_BYTES the
 * session printed and links the pull-request URLs in it (§22.1) to the
 * attempt, as the close-out's are (§22.4). Only a runner given forge hosts
 * scans. What each attempt had linked is remembered here, in memory and
 * bounded, so a rescan costs no store write; linking is idempotent, so a
 * runner that forgot (restarted, or evicted the entry) only writes again.
 * A read or link that fails is reported and the reconcile goes on.
 */
import { findPullUrls, scannableOutput } from "../../core/dispatch/links.js";
import { ConfigError } from "../../errors.js";
import type { AttemptRow } from "../../store/dispatch/ops.js";
import { pullOps } from "../../store/pulls/ops.js";
import type { OutputOutcome, WorkerAdapter } from "../workers/adapter.js";
import type { RunnerContext } from "./context.js";

export const DEFAULT_OUTPUT_SCAN_MS = 30_000;
export const MIN_OUTPUT_SCAN_MS = 1_000;
export const MAX_OUTPUT_SCAN_MS = 3_600_000;
/** How much of a session's output a scan reads: its last 64 KiB. */
export const OUTPUT_SCAN_BYTES = 64 * 1024;
/** A read that takes longer is given up for this scan (the reconcile goes on). */
export const OUTPUT_READ_TIMEOUT_MS = 5_000;
/** Attempts remembered at once (the oldest is forgotten first), and URLs per attempt. */
export const MAX_REMEMBERED_ATTEMPTS = 10_000;
export const MAX_REMEMBERED_URLS = 1_000;

/** `outputScanMs` checked: an integer in 1 s–1 h (`RATCHET_CONFIG` otherwise). */
export function outputScanMsOf(v: number | undefined): number {
  const n = v ?? DEFAULT_OUTPUT_SCAN_MS;
  if (!Number.isSafeInteger(n) || n < MIN_OUTPUT_SCAN_MS || n > MAX_OUTPUT_SCAN_MS)
    throw new ConfigError(`outputScanMs must be an integer in ${MIN_OUTPUT_SCAN_MS}–${MAX_OUTPUT_SCAN_MS}`);
  return n;
}

interface Seen {
  at: number;
  readonly linked: Set<string>;
}

/** What one scan did: the URLs it newly linked, or why it could not read or link. */
export type ScanResult =
  | { readonly kind: "skipped" }
  | { readonly kind: "scanned"; readonly linked: readonly string[] }
  | { readonly kind: "failed"; readonly message: string; readonly linked: readonly string[] };

export class OutputScans {
  readonly #seen = new Map<string, Seen>();

  constructor(readonly everyMs: number) {}

  /** Whether a live scan of the attempt is due at `now` (never scanned by this runner, or `everyMs` ago). */
  due(attemptId: string, now: number): boolean {
    const s = this.#seen.get(attemptId);
    return s === undefined || now - s.at >= this.everyMs || now < s.at;
  }

  entry(attemptId: string, now: number): Seen {
    let s = this.#seen.get(attemptId);
    if (s === undefined) {
      if (this.#seen.size >= MAX_REMEMBERED_ATTEMPTS) this.#seen.delete(this.#seen.keys().next().value!);
      s = { at: now, linked: new Set() };
      this.#seen.set(attemptId, s);
    }
    s.at = now;
    return s;
  }

  forget(attemptId: string): void {
    this.#seen.delete(attemptId);
  }

  get size(): number {
    return this.#seen.size;
  }
}

/** The session's output, or why it could not be read within OUTPUT_READ_TIMEOUT_MS. */
async function readOutput(worker: WorkerAdapter, session: string): Promise<OutputOutcome | Error> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<Error>((resolve) => {
    timer = setTimeout(() => resolve(new Error("output read timed out")), OUTPUT_READ_TIMEOUT_MS);
  });
  try {
    return await Promise.race([
      worker.output(session, { maxBytes: OUTPUT_SCAN_BYTES }).catch((e: unknown) => e as Error),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * spec §22.11: scans the attempt's session output and links the pull requests it names. `final` is
 * the settlement's scan: always made, and the last line counts even without a line break. Never
 * throws: trouble is in the result.
 */
export async function scanOutput(
  ctx: RunnerContext,
  a: AttemptRow,
  worker: WorkerAdapter,
  now: number,
  final: boolean,
): Promise<ScanResult> {
  const scans = ctx.outputScans;
  if (ctx.pullHosts === null || scans === null || a.session === null) return { kind: "skipped" };
  if (!final && !scans.due(a.id, now)) return { kind: "skipped" };
  const seen = scans.entry(a.id, now);
  const linked: string[] = [];
  try {
    const out = await readOutput(worker, a.session);
    if (out instanceof Error) return { kind: "failed", message: `output: ${out.message}`, linked };
    if (out.kind === "absent") return { kind: "scanned", linked };
    const text = scannableOutput(out.text, out.cut, final);
    const pulls = pullOps(ctx.store);
    for (const f of findPullUrls(text, ctx.pullHosts)) {
      if (seen.linked.has(f.url)) continue;
      const r = await pulls.link(a.id, f, "url");
      if (r === null) break; // the attempt is gone
      if (seen.linked.size < MAX_REMEMBERED_URLS) seen.linked.add(f.url);
      if (r.created) linked.push(f.url);
    }
    return { kind: "scanned", linked };
  } catch (e) {
    return { kind: "failed", message: `output link: ${(e as Error).message}`, linked };
  }
}
