import { describe, expect, it } from "vitest";
import { CLAIM_COLUMNS, claimRowFromRaw } from "../../src/store/rows.js";

describe("claim rows read in raw mode (spec §3.2)", () => {
  it("maps every column of CLAIM_COLUMNS from its position, so a reordered list cannot shift values", () => {
    // Each position holds its own column name: the mapped row must give back name -> name.
    const row = claimRowFromRaw([...CLAIM_COLUMNS]) as Record<string, unknown>;
    expect(Object.keys(row).sort()).toEqual([...CLAIM_COLUMNS].sort());
    for (const col of CLAIM_COLUMNS) expect(row[col]).toBe(col);
  });
});
