/**
 * Bounds on what a model sees of a tool's output (spec §19.7): the head and the tail of the text,
 * with a marker saying what was left out between them. The full output stays in the call's
 * durable stream; only the result the model reads is cut.
 */

export interface TruncateLimits {
  /** Characters kept at most (head + tail). Default 30,000. */
  maxChars?: number;
  /** Lines kept at most (head + tail). Default 2,000. */
  maxLines?: number;
}

export const DEFAULT_RESULT_CHARS = 30_000;
export const DEFAULT_RESULT_LINES = 2_000;

export interface Truncated {
  text: string;
  truncated: boolean;
  /** Characters and lines of the input. */
  chars: number;
  lines: number;
}

/** Keeps the first and last halves of `text` within both limits; a marker stands for the rest. */
export function truncateText(text: string, limits: TruncateLimits = {}): Truncated {
  const maxChars = limits.maxChars ?? DEFAULT_RESULT_CHARS;
  const maxLines = limits.maxLines ?? DEFAULT_RESULT_LINES;
  const lines = text.split("\n");
  const whole = { text, truncated: false, chars: text.length, lines: lines.length };
  if (text.length <= maxChars && lines.length <= maxLines) return whole;
  const headLines = Math.ceil(maxLines / 2);
  const tailLines = Math.floor(maxLines / 2);
  let head = lines.slice(0, headLines).join("\n");
  let tail =
    lines.length > headLines ? lines.slice(Math.max(headLines, lines.length - tailLines)).join("\n") : "";
  const half = Math.floor(maxChars / 2);
  if (head.length > half) head = head.slice(0, half);
  if (tail.length > maxChars - half) tail = tail.slice(tail.length - (maxChars - half));
  const omittedChars = text.length - head.length - tail.length;
  const omittedLines = lines.length - head.split("\n").length - (tail ? tail.split("\n").length : 0);
  const marker = `\n[… ${omittedChars} characters${omittedLines > 0 ? `, ${omittedLines} lines` : ""} omitted …]\n`;
  return { ...whole, text: head + marker + tail, truncated: true };
}

/**
 * A stream's head and tail kept as it arrives (the text of a long command, spec §19.4), `max`
 * characters in all, the rest counted.
 */
export class HeadTail {
  #head = "";
  #tail = "";
  #chars = 0;
  #dropped = false;
  constructor(readonly max: number) {}

  add(text: string): void {
    this.#chars += text.length;
    const half = Math.floor(this.max / 2);
    let rest = text;
    if (this.#head.length < half) {
      const take = half - this.#head.length;
      this.#head += rest.slice(0, take);
      rest = rest.slice(take);
      if (rest.length === 0) return;
    }
    this.#tail += rest;
    const room = this.max - half;
    if (this.#tail.length > room) {
      this.#tail = this.#tail.slice(this.#tail.length - room);
      this.#dropped = true;
    }
  }

  get chars(): number {
    return this.#chars;
  }

  get dropped(): boolean {
    return this.#dropped;
  }

  text(): string {
    if (!this.#dropped) return this.#head + this.#tail;
    const omitted = this.#chars - this.#head.length - this.#tail.length;
    return `${this.#head}\n[… ${omitted} characters omitted …]\n${this.#tail}`;
  }
}
