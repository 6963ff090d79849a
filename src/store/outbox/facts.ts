/**
 * The outbox's write side (spec §21.1–§21.4): the fragment any store program
 * yields to record facts in its own transaction.
 *
 * A fact is written by the change it describes, never after it: the program
 * that moves an attempt, routes an item or updates a pull request's link
 * yields `appendFacts` before it returns, so the move and its facts commit
 * together or not at all (spec §21.2). A guarded write that lost must not
 * yield it (it has nothing to report), and a transaction that throws after
 * the insert rolls the facts back with everything else.
 *
 * Order (spec §21.3): on PostgreSQL the insert first takes the transaction-
 * scoped advisory lock `outbox`, so fact-writing transactions take their
 * sequence numbers and commit in one order; a sender that has read seq n has
 * seen every committed fact below n, and its cursor never skips a fact that
 * committed late. On SQLite the IMMEDIATE transaction already serialises
 * writers. The cost is that fact-writing transactions serialise on PostgreSQL
 * from the insert to their commit: yield `appendFacts` last in a program, after
 * the guarded writes, so the lock is held briefly and never waited for while
 * holding a row lock another fact writer needs first.
 */
import type { FactInput } from "../../core/outbox.js";
import { ValidationError } from "../../errors.js";
import { type Program, q } from "../tree/program.js";

export const O = "{s}.ratchet_outbox";

/** Facts one change may carry (spec §21.1). */
export const MAX_FACTS_PER_CHANGE = 100;
/** A fact's JSON `data`, encoded (spec §21.1). */
export const MAX_FACT_DATA_BYTES = 64 * 1024;
export const MAX_FACT_TYPE_CHARS = 100;
export const MAX_FACT_SUBJECT_CHARS = 200;

/** Dotted lowercase kind: `attempt.moved`, `pr.state`, `notice.attention`. */
const TYPE_RE = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$/;

export type { FactInput };

/** A checked fact, its data encoded once. */
export interface EncodedFact {
  readonly type: string;
  readonly subject: string;
  readonly data: string;
}

/**
 * Checks and encodes facts (spec §21.1). Call it before the transaction to
 * refuse bad input early; `appendFacts` calls it again, so a program that
 * skipped it still writes nothing bad (its throw rolls the change back).
 * Throws ValidationError (RATCHET_INVALID_INPUT / RATCHET_PAYLOAD_TOO_LARGE).
 */
export function checkFacts(facts: readonly FactInput[]): EncodedFact[] {
  if (!Array.isArray(facts) || facts.length > MAX_FACTS_PER_CHANGE)
    throw new ValidationError(`a change carries an array of at most ${MAX_FACTS_PER_CHANGE} facts`);
  return facts.map((f, i) => {
    if (typeof f?.type !== "string" || f.type.length > MAX_FACT_TYPE_CHARS || !TYPE_RE.test(f.type))
      throw new ValidationError(
        `fact ${i}: type must be a dotted lowercase name of at most ${MAX_FACT_TYPE_CHARS} characters (got ${JSON.stringify(String(f?.type)).slice(0, 120)})`,
      );
    if (
      typeof f.subject !== "string" ||
      f.subject.length === 0 ||
      f.subject.length > MAX_FACT_SUBJECT_CHARS ||
      f.subject.includes("\0")
    )
      throw new ValidationError(
        `fact ${i}: subject must be 1–${MAX_FACT_SUBJECT_CHARS} characters without NUL`,
      );
    let data: string | undefined;
    try {
      data = JSON.stringify(f.data ?? null);
    } catch (e) {
      throw new ValidationError(`fact ${i}: data is not JSON-serialisable`, "RATCHET_INVALID_JSON", {
        cause: e,
      });
    }
    if (data === undefined)
      throw new ValidationError(`fact ${i}: data is not JSON-serialisable`, "RATCHET_INVALID_JSON");
    if (Buffer.byteLength(data) > MAX_FACT_DATA_BYTES)
      throw new ValidationError(
        `fact ${i}: data is ${Buffer.byteLength(data)} bytes encoded, more than ${MAX_FACT_DATA_BYTES}`,
        "RATCHET_PAYLOAD_TOO_LARGE",
      );
    return { type: f.type, subject: f.subject, data };
  });
}

/**
 * Appends facts to the outbox inside the running transaction (spec §21.2),
 * stamped with the transaction's clock (`:now`) and the next sequence numbers,
 * in the order given. No facts: no SQL at all.
 *
 * Usage, inside any store program:
 * ```ts
 * const moved = yield* one(`UPDATE … WHERE <guard> RETURNING *`, p);
 * if (!moved) return "stale";                      // a lost guard reports nothing
 * yield* appendFacts([{ type: "pr.state", subject: "pr:o/r#7", data: { state: "merged" } }]);
 * ```
 * Invariant: the facts commit iff the transaction that yields this commits,
 * and on PostgreSQL in the order of their seq (spec §21.2, §21.3).
 */
export function* appendFacts(facts: readonly FactInput[]): Program<void> {
  yield* insertFacts(checkFacts(facts));
}

/** Rows per INSERT when many changes append together (three parameters a row). */
const INSERT_ROWS = 200;

/**
 * appendFacts for a batch of changes in one transaction (a settle batch's task facts, spec §21.17):
 * each change checked on its own (at most MAX_FACTS_PER_CHANGE), the lock taken once, the rows
 * inserted INSERT_ROWS at a time in the changes' order, where a statement per change cost a
 * PostgreSQL settle batch a round trip per task.
 */
export function* appendFactsOfChanges(changes: readonly (readonly FactInput[])[]): Program<void> {
  const rows: EncodedFact[] = [];
  for (const facts of changes) for (const r of checkFacts(facts)) rows.push(r);
  yield* insertFacts(rows);
}

function* insertFacts(rows: readonly EncodedFact[]): Program<void> {
  if (rows.length === 0) return;
  yield { op: "lock", key: "outbox" };
  for (let k = 0; k < rows.length; k += INSERT_ROWS) {
    const p: Record<string, unknown> = {};
    const values: string[] = [];
    for (let i = 0; i < Math.min(INSERT_ROWS, rows.length - k); i++) {
      const r = rows[k + i]!;
      p[`t${i}`] = r.type;
      p[`s${i}`] = r.subject;
      p[`d${i}`] = r.data;
      values.push(`(:t${i}, :s${i}, :now, :d${i})`);
    }
    yield* q(`INSERT INTO ${O} (type, subject, at, data) VALUES ${values.join(", ")}`, p);
  }
}

/** The facts of the settlements that applied ("ok"), one change each, in the batch's order. */
export function factsOfApplied(
  items: readonly { readonly facts?: readonly FactInput[] | undefined }[],
  results: readonly unknown[],
): (readonly FactInput[])[] {
  const out: (readonly FactInput[])[] = [];
  for (let i = 0; i < items.length; i++) {
    const f = items[i]!.facts;
    if (f && results[i] === "ok") out.push(f);
  }
  return out;
}
