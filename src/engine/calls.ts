/**
 * Checks of what public calls take, beside the checks of enqueue (enqueue.ts): the keys of each
 * call's options (spec §2.1) and read filters (spec §9.6).
 *
 * Read filters are validated once here, before any store sees them: both
 * stores then get only filters a task could match, and answer alike. Without it a NUL in a
 * queue name failed on PostgreSQL with RATCHET_STORE ("invalid byte sequence") while SQLite
 * returned an empty list.
 *
 * Invariant: a filter value is refused exactly when enqueue would refuse it as an option
 * (spec §2.1), so no refused filter could ever have matched a stored task.
 */
import { OUTCOMES, type Outcome, STATUSES, type Status } from "../core/model.js";
import { ValidationError } from "../errors.js";
import type { ListFilter } from "../store/store.js";
import { checkKeys, checkName, describe } from "./definition.js";

/**
 * The keys each public call's options may have; checkKeys refuses any other (spec §2.1), as the
 * HTTP API refuses unknown fields.
 */
export const CALL_KEYS = {
  start: new Set(["concurrency", "prefetch", "queues", "shutdownTimeoutMs", "serve"]),
  tick: new Set(["budgetMs", "concurrency", "max", "queues"]),
  wait: new Set(["timeoutMs"]),
  limit: new Set(["limit"]),
  abortScope: new Set(["background"]),
  concurrency: new Set(["key"]),
} as const satisfies Record<string, ReadonlySet<string>>;

const LIST_KEYS: ReadonlySet<string> = new Set([
  "status",
  "outcome",
  "queue",
  "job",
  "name",
  "before",
  "limit",
]);

/** Default and bound of `list()` (spec §9.1). */
export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 1000;

/** spec §9.6: a checked copy of a list filter (undefined fields dropped), or a ValidationError. */
export function checkListFilter(filter: Partial<ListFilter> | undefined): ListFilter {
  checkKeys(filter, LIST_KEYS, "list filter");
  const f = filter ?? {};
  const limit = f.limit ?? DEFAULT_LIST_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
    throw new ValidationError(`list limit must be an integer in [1, ${MAX_LIST_LIMIT}]`);
  const out: ListFilter = { limit };
  if (f.status !== undefined) {
    if (!(STATUSES as readonly unknown[]).includes(f.status))
      throw new ValidationError(
        `list status must be one of ${STATUSES.join(", ")} (got ${describe(f.status)})`,
      );
    out.status = f.status as Status;
  }
  if (f.outcome !== undefined) {
    if (!(OUTCOMES as readonly unknown[]).includes(f.outcome))
      throw new ValidationError(
        `list outcome must be one of ${OUTCOMES.join(", ")} (got ${describe(f.outcome)})`,
      );
    out.outcome = f.outcome as Outcome;
  }
  if (f.queue !== undefined) out.queue = checkName(f.queue, "list queue");
  if (f.job !== undefined) out.job = checkName(f.job, "list job");
  if (f.name !== undefined) out.name = checkName(f.name, "list name");
  if (f.before !== undefined) {
    if (typeof f.before !== "number" || !Number.isSafeInteger(f.before) || f.before < 1)
      throw new ValidationError(`list before must be a positive task id (got ${describe(f.before)})`);
    out.before = f.before;
  }
  return out;
}
