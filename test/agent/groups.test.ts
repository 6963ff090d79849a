/**
 * spec §19.30: a reap identifies a leftover process group by host, boot and its leader's start
 * time, so it never signals a group it cannot tell apart from the recorded one.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { type ProcessGroupRecord, reapGroup, recordGroup } from "../../src/agent/env/groups.js";
import { alive } from "../fixtures/procs.js";

const started: number[] = [];
afterEach(() => {
  for (const pgid of started.splice(0))
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // Gone.
    }
});

/** A detached group (a shell with a background sleep), as a dead worker's exec leaves one. */
function leftover(): ProcessGroupRecord {
  const child = spawn("bash", ["-c", "sleep 60 & wait"], { detached: true, stdio: "ignore" });
  child.unref();
  started.push(child.pid!);
  return recordGroup(child.pid!);
}

describe("reaping a leftover process group (spec §19.30)", () => {
  it("§19.30 the record names this host, its boot and the leader's start time; a reap kills the group", async () => {
    const g = leftover();
    expect(g.bootId).toBe(readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim());
    expect(g.start).toMatch(/^\d+$/);
    expect(await reapGroup(g)).toBe("killed");
    expect(alive(g.pgid)).toBe(false);
    expect(await reapGroup(g)).toBe("gone");
  });

  it("§19.30 a leader pid whose start time differs (a recycled pid) is left alone", async () => {
    const g = leftover();
    expect(await reapGroup({ ...g, start: String(BigInt(g.start) - 1n) })).toBe("gone");
    expect(alive(g.pgid)).toBe(true);
  });

  it("§19.30 another host's group is out of reach; a record without boot id or start time signals nothing", async () => {
    const g = leftover();
    expect(await reapGroup({ ...g, host: `${g.host}-elsewhere` })).toBe("elsewhere");
    expect(await reapGroup({ ...g, bootId: "" })).toBe("unverifiable");
    expect(await reapGroup({ ...g, start: "" })).toBe("unverifiable");
    expect(await reapGroup({ ...g, bootId: "another-boot" })).toBe("gone");
    expect(alive(g.pgid)).toBe(true);
  });
});
