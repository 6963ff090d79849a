/** Pull-request URLs and commit trailers (spec §22.1, §22.2): exact examples and hostile property tests. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  attemptTrailers,
  findPullUrls,
  MAX_FOUND_PULLS,
  MAX_TRAILER_IDS,
  parsePullUrl,
  parseTrailers,
  scannableOutput,
} from "../../src/core/dispatch/links.js";

const GH = "https://github.com/acme/widgets/pull/12";

describe("pull-request URLs", () => {
  it("§22.1 finds GitHub pull-request URLs in prose, markdown and punctuation", () => {
    const text = `Opened ${GH}. See also (https://github.com/Acme/Other.repo/pull/7), [x](https://GITHUB.com/a-b/c_d/pull/99/files) and <https://github.com/o/r/pull/3#discussion>`;
    expect(findPullUrls(text).map((f) => f.url)).toEqual([
      GH,
      "https://github.com/Acme/Other.repo/pull/7",
      "https://github.com/a-b/c_d/pull/99",
      "https://github.com/o/r/pull/3",
    ]);
    expect(findPullUrls(GH)[0]).toEqual({
      host: "github.com",
      owner: "acme",
      repo: "widgets",
      number: 12,
      url: GH,
    });
  });

  it("§22.1 repeats are one link; case of host and names does not make another", () => {
    expect(findPullUrls(`${GH} ${GH} https://GitHub.com/ACME/widgets/pull/12`)).toHaveLength(1);
  });

  it("§22.1 configured GitHub Enterprise hosts, and only those", () => {
    const t = "https://ghe.example.com/team/app/pull/4 https://github.com/a/b/pull/1";
    expect(findPullUrls(t, ["ghe.example.com"]).map((f) => f.host)).toEqual(["ghe.example.com"]);
    expect(findPullUrls(t, ["github.com", "GHE.example.com"]).map((f) => f.number)).toEqual([4, 1]);
  });

  it("§22.1 refuses lookalikes, nesting, other schemes and malformed numbers", () => {
    for (const bad of [
      "https://github.com.evil.com/a/b/pull/1",
      "https://evilgithub.com/a/b/pull/1",
      "https://github.com@evil.com/a/b/pull/1",
      "https://evil.com/redirect?u=https://github.com/a/b/pull/1",
      "https://evil.com/https://github.com/a/b/pull/1",
      "xhttps://github.com/a/b/pull/1",
      "http://github.com/a/b/pull/1",
      "https://gіthub.com/a/b/pull/1", // Cyrillic і
      "https://github.com/a/b/pull/01",
      "https://github.com/a/b/pull/12abc",
      "https://github.com/a/b/pull/99999999999",
      "https://github.com/a/b/pull/%31",
      "https://github.com/a/b/pulls/1",
      "https://github.com/a/b/issues/1",
      "https://github.com/-a/b/pull/1",
      "https://github.com/a/../pull/1",
      "https://github.com:8443/a/b/pull/1",
      "https://github.com/a/b/pull/",
      "https：//github.com/a/b/pull/1",
    ])
      expect(findPullUrls(bad), bad).toEqual([]);
  });

  it("§22.1 a manual link is exactly one pull-request URL", () => {
    expect(parsePullUrl(`  ${GH}/files `)?.url).toBe(GH);
    expect(parsePullUrl(`${GH}?x=1`)?.number).toBe(12);
    expect(parsePullUrl(`see ${GH}`)).toBeNull();
    expect(parsePullUrl(`${GH} ${GH.replace("12", "13")}`)).toBeNull();
    expect(parsePullUrl(`${GH}x`)).toBeNull();
    expect(parsePullUrl("not a url")).toBeNull();
  });

  it("§22.1 never throws, stays bounded, and every result is a canonical URL found in the text (hostile strings)", () => {
    const piece = fc.oneof(
      fc.constantFrom(
        GH,
        "https://",
        "github.com",
        "/pull/",
        "://",
        "https://github.com/",
        "(",
        ")",
        "=",
        "/",
        " ",
        "\n",
        "0",
        "9",
        "İ",
        "\u0000",
        "\u202e",
      ),
      fc.string({ unit: "grapheme", maxLength: 20 }),
      fc.string({ unit: "binary", maxLength: 20 }),
      fc.integer({ min: 0, max: 2 ** 40 }).map(String),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 60 }), (parts) => {
        const text = parts.join("");
        const found = findPullUrls(text);
        expect(found.length).toBeLessThanOrEqual(MAX_FOUND_PULLS);
        for (const f of found) {
          expect(f.url).toMatch(
            /^https:\/\/github\.com\/[A-Za-z0-9-]{1,39}\/[A-Za-z0-9._-]{1,100}\/pull\/[1-9][0-9]{0,9}$/,
          );
          expect(text.toLowerCase()).toContain(f.url.slice(8).toLowerCase());
        }
      }),
      { numRuns: 500 },
    );
  });

  it("§22.1 a URL embedded between separators is always found", () => {
    const name = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9-]{0,10}$/);
    fc.assert(
      fc.property(
        name,
        name,
        fc.integer({ min: 1, max: 2_000_000 }),
        fc.constantFrom(" ", "\n", "(", "<", '"'),
        fc.string(),
        (o, r, n, sep, tail) => {
          const url = `https://github.com/${o}/${r}/pull/${n}`;
          const found = findPullUrls(`noise${sep}${url} ${tail}`);
          expect(found[0]?.url).toBe(url);
        },
      ),
    );
  });

  it("§22.1 huge inputs: a bounded prefix is read and results are capped", () => {
    const many = Array.from({ length: 500 }, (_, i) => `https://github.com/o/r/pull/${i + 1}`).join(" ");
    expect(findPullUrls(many)).toHaveLength(MAX_FOUND_PULLS);
    const far = `${"a".repeat(2 * 1024 * 1024)} ${GH}`;
    expect(findPullUrls(far)).toEqual([]);
    const adversarial = "https://github.com/a/".repeat(100_000) + "://".repeat(100_000);
    expect(findPullUrls(adversarial)).toEqual([]);
  });
});

describe("commit trailers", () => {
  it("§22.2 Ratchet-Attempt trailers of the last paragraph, any key case", () => {
    const msg =
      "Fix the widget\n\nLonger body.\n\nSigned-off-by: A <a@x>\nratchet-attempt: 12\nRATCHET-ATTEMPT : 40\n";
    expect(attemptTrailers(msg)).toEqual(["12", "40"]);
    expect(parseTrailers(msg).map((t) => t.key)).toEqual([
      "Signed-off-by",
      "ratchet-attempt",
      "RATCHET-ATTEMPT",
    ]);
  });

  it("§22.2 not the subject, not a body paragraph, not a bad id", () => {
    expect(attemptTrailers("Ratchet-Attempt: 5")).toEqual([]);
    expect(attemptTrailers("Subject\n\nRatchet-Attempt: 5\n\nA closing paragraph of prose.")).toEqual([]);
    expect(attemptTrailers("S\n\nRatchet-Attempt: 05\nRatchet-Attempt: x\nRatchet-Attempt: 1 2")).toEqual([]);
    expect(attemptTrailers("S\r\n\r\nRatchet-Attempt: 9\r\n")).toEqual(["9"]);
  });

  it("§22.2 git's 25% rule: a mixed paragraph counts only with a Ratchet-Attempt trailer in it", () => {
    expect(attemptTrailers("S\n\nsome prose line\nRatchet-Attempt: 3")).toEqual(["3"]);
    expect(parseTrailers("S\n\none\ntwo\nthree\nfour\nSigned-off-by: x")).toEqual([]);
    expect(attemptTrailers("S\n\none\ntwo\nthree\nfour\nRatchet-Attempt: 3")).toEqual([]);
  });

  it("§22.2 continuation lines join the trailer above", () => {
    expect(parseTrailers("S\n\nCo-authored-by: A\n  and B\nRatchet-Attempt: 7")).toEqual([
      { key: "Co-authored-by", value: "A and B" },
      { key: "Ratchet-Attempt", value: "7" },
    ]);
  });

  it("§22.2 never throws and stays bounded on hostile messages", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.constantFrom("\n", "\n\n", "Ratchet-Attempt: ", ":", " ", "\t", "#", "1", "\r"),
            fc.string({ unit: "grapheme", maxLength: 12 }),
          ),
          { maxLength: 80 },
        ),
        (parts) => {
          const ids = attemptTrailers(parts.join(""));
          expect(ids.length).toBeLessThanOrEqual(MAX_TRAILER_IDS);
          for (const id of ids) expect(id).toMatch(/^[1-9][0-9]{0,17}$/);
        },
      ),
      { numRuns: 500 },
    );
    const huge = `S\n\n${"Ratchet-Attempt: 1\n".repeat(200_000)}`;
    expect(attemptTrailers(huge)).toEqual(["1"]);
    const many = `S\n\n${Array.from({ length: 300 }, (_, i) => `Ratchet-Attempt: ${i + 1}`).join("\n")}`;
    expect(attemptTrailers(many)).toHaveLength(MAX_TRAILER_IDS);
  });
});

describe("live output's scannable part", () => {
  it("§22.11 a cut output loses its first line; a live one its unfinished last line; a final one keeps it", () => {
    expect(scannableOutput("a\nb\nc", false, false)).toBe("a\nb\n");
    expect(scannableOutput("a\nb\nc", true, false)).toBe("b\n");
    expect(scannableOutput("a\nb\nc", true, true)).toBe("b\nc");
    expect(scannableOutput("a\nb\nc", false, true)).toBe("a\nb\nc");
    expect(scannableOutput("no line break", true, true)).toBe("");
    expect(scannableOutput("no line break", false, false)).toBe("");
    expect(scannableOutput("", true, false)).toBe("");
  });
});
