import { describe, expect, it } from "vitest";
import { CLAIM_COLUMNS, type ClaimRow, claimedFromRaw, toClaimed } from "../../src/store/rows.js";

describe("claim rows read in raw mode (spec §3.2)", () => {
  it("reads every column of CLAIM_COLUMNS from its position, as toClaimed reads the named row", () => {
    // Distinct values per column, so a value read from the wrong position shows.
    const named: ClaimRow = {
      id: 7,
      queue: "q",
      name: "n",
      version: 2,
      input: '{"in":1}',
      status: "running",
      priority: 3,
      max_ms: 1_000,
      attempts: 4,
      epoch: 5,
      lease_until: 6_000,
      locked_by: "w",
      job: "j",
      abort_requested: 1,
      started_at: 8_000,
      claimed_at: 9_000,
      owner_id: 10,
      scope: "s",
      checkpoint: '{"cp":2}',
      seat: "seat:k",
      rate: '[{"bucket":"b","cost":1}]',
      order_key: 11,
    } as ClaimRow;
    const raw = CLAIM_COLUMNS.map((c) => (named as Record<string, unknown>)[c]);
    for (const reclaimed of [false, true])
      expect(claimedFromRaw(raw, reclaimed)).toEqual(toClaimed(named, reclaimed));
    // Every column is in the row: none was left out of the named version either.
    expect(Object.keys(named).sort()).toEqual([...CLAIM_COLUMNS].sort());
  });
});
