/**
 * The enqueuer of a scenario: a Ratchet instance in the runner's process that
 * never runs tasks. It appends `ack ID` to the acknowledgement log only after
 * `enqueue()` resolved — the log is exactly what callers were promised (P1).
 * An enqueue that throws is a P7 finding unless the error is a RatchetError.
 */
import { appendFileSync } from "node:fs";
import { Ratchet, RatchetError, silentLogger } from "../src/index.js";
import { makeChaosTasks } from "./fixtures/tasks.js";
import type { Violation } from "./scenario.js";

export class Enqueuer {
  readonly violations: Violation[] = [];
  acked = 0;
  /** Typed enqueue errors (allowed by P7, but counted). */
  refused = 0;

  private constructor(
    readonly r: Ratchet,
    readonly acks: string,
  ) {}

  /** `maxMs`: the workers' maxMs — the enqueue records it on the task, and the lease is computed from it. */
  static async open(db: string, acks: string, maxMs: number): Promise<Enqueuer> {
    const r = await Ratchet.open({
      store: `sqlite:${db}`,
      // Registered so enqueue validates the names; this instance never runs them.
      tasks: makeChaosTasks({ effectsFd: -1, effectsPath: "", db, maxMs, store: () => r.store }),
      logger: silentLogger,
    });
    return new Enqueuer(r, acks);
  }

  /** The same on a PostgreSQL schema (scenarios 2 and 4). */
  static async openPg(url: string, schema: string, acks: string, maxMs: number): Promise<Enqueuer> {
    const r: Ratchet = await Ratchet.open({
      store: url,
      postgres: { schema, poolMax: 3 },
      tasks: makeChaosTasks({ effectsFd: -1, effectsPath: "", db: "", maxMs, store: () => r.store }),
      logger: silentLogger,
    });
    return new Enqueuer(r, acks);
  }

  async enqueue(name: string, input: unknown, opts: { delayMs?: number } = {}): Promise<number | undefined> {
    try {
      const id = await this.r.enqueue(name, input, opts);
      appendFileSync(this.acks, `ack ${id}\n`);
      this.acked++;
      return id;
    } catch (err) {
      if (err instanceof RatchetError) this.refused++;
      else
        this.violations.push({ promise: "P7", detail: `enqueue threw a non-Ratchet error: ${String(err)}` });
      return undefined;
    }
  }

  /** How many tasks are terminal (all tasks of the store). */
  async terminal(): Promise<number> {
    let n = 0;
    for (const q of await this.r.stats()) n += q.byStatus.terminal ?? 0;
    return n;
  }

  /** terminal(), or null while the store is unreachable (a PostgreSQL restart). */
  async terminalOrNull(): Promise<number | null> {
    try {
      return await this.terminal();
    } catch {
      return null;
    }
  }

  close(): Promise<void> {
    return this.r.close();
  }
}
