/**
 * The writer side of durable output streams (spec §16): what `ctx.stream(name)` returns.
 *
 * Modes of a writer:
 * - idle: nothing buffered, no commit in flight;
 * - buffering: chunks written since the last commit wait for the interval timer (armed by the
 *   first of them, at most `intervalMs` after the commit before), a boundary (a step, a wait, a
 *   sleep, the end of the invocation) or `flush()`/`close()`;
 * - committing: one batch in flight (group-committed with other writers' batches, batcher.ts);
 *   what is written meanwhile goes into the next batch;
 * - failed: a commit was refused (the claim is lost, the cap is hit): the error is kept and every
 *   later call throws it; what was buffered is dropped, the stream stays as committed.
 * - closed: close() committed; writes throw StreamClosedError.
 *
 * Invariant: a batch is sent at the length the writer saw committed (spec §16.4), and at most one
 * batch of a writer is in flight, so offsets are exactly the order of writes; a fenced-out holder's
 * batch changes nothing (spec §16.3).
 */
import { toStorableJson } from "../core/json.js";
import {
  InvalidStateError,
  LeaseLostError,
  RatchetError,
  StoreError,
  StreamClosedError,
  StreamFullError,
  ValidationError,
} from "../errors.js";
import type { Fence, Store } from "../store/store.js";
import {
  MAX_STREAMS_PER_TASK,
  type StreamAppend,
  type StreamAppendResult,
  type StreamInfo,
} from "../store/streams/ops.js";
import type { Batcher } from "./batcher.js";
import { checkName } from "./definition.js";
import { retryStore } from "./store-retry.js";

/** The writer `ctx.stream(name)` resolves to. */
export interface StreamWriter {
  readonly name: string;
  /** The offset the next chunk written gets: what the stream held when opened, plus what was written since. */
  readonly offset: number;
  /** Chunks committed: offsets below this survive a crash. */
  readonly committed: number;
  /** close() was called (in this invocation or an earlier one). */
  readonly closed: boolean;
  /** Buffers one chunk (a string or a JSON value); committed within the interval. Throws if it cannot be. */
  write(chunk: unknown): void;
  /** Commits what is buffered now and waits for it. */
  flush(): Promise<void>;
  /** Commits what is buffered and closes the stream: readers end after its last chunk. */
  close(): Promise<void>;
}

/** What the instance gives every writer. */
export interface StreamDeps {
  store: Store;
  appends: Batcher<StreamAppend, StreamAppendResult>;
  /** spec §16.2: a buffered chunk is committed at most this long after the commit before. */
  intervalMs: number;
  maxChunkBytes: number;
  maxBytes: number;
  /** Told after each of this process's committed appends (live readers here wake at once). */
  appended(taskId: number, name: string): void;
}

/** Defaults of the options (spec §16.2, §16.6). */
export const DEFAULT_STREAM_INTERVAL_MS = 100;
export const DEFAULT_MAX_STREAM_CHUNK_BYTES = 64 * 1024;
export const DEFAULT_MAX_STREAM_BYTES = 16 * 1024 * 1024;

export class Writer implements StreamWriter {
  readonly name: string;
  readonly #fence: Fence;
  readonly #deps: StreamDeps;
  /** Throws if the invocation ended (the writer's owner). */
  readonly #live: () => void;
  /** Told when a commit was refused because the claim is gone. */
  readonly #lost: (e: LeaseLostError) => void;
  #length: number;
  #bytes: number;
  #pending: string[] = [];
  #pendingBytes = 0;
  #closeWanted = false;
  #closedStored: boolean;
  #inflight: Promise<void> | null = null;
  #timer: NodeJS.Timeout | undefined;
  #lastCommitAt = 0;
  #error: RatchetError | undefined;

  constructor(
    name: string,
    info: StreamInfo | null,
    fence: Fence,
    deps: StreamDeps,
    live: () => void,
    lost: (e: LeaseLostError) => void,
  ) {
    this.name = name;
    this.#fence = fence;
    this.#deps = deps;
    this.#live = live;
    this.#lost = lost;
    this.#length = info?.length ?? 0;
    this.#bytes = info?.bytes ?? 0;
    this.#closedStored = info?.closed ?? false;
  }

  get offset(): number {
    return this.#length + this.#pending.length;
  }

  get committed(): number {
    return this.#length;
  }

  get closed(): boolean {
    return this.#closedStored || this.#closeWanted;
  }

  /** Chunks wait for a commit (a boundary flushes them). */
  get dirty(): boolean {
    return this.#pending.length > 0 || (this.#closeWanted && !this.#closedStored) || this.#inflight !== null;
  }

  write(chunk: unknown): void {
    this.#live();
    if (this.#error) throw this.#error;
    if (this.closed) throw new StreamClosedError(this.#fence.taskId, this.name);
    const max = this.#deps.maxChunkBytes;
    const text = toStorableJson(
      chunk === undefined ? null : chunk,
      () => `chunk of stream "${this.name}"`,
      max,
    );
    const bytes = Buffer.byteLength(text);
    if (bytes > max)
      throw new ValidationError(
        `chunk of stream "${this.name}" is ${bytes} bytes; the limit is ${max} (maxStreamChunkBytes)`,
        "RATCHET_PAYLOAD_TOO_LARGE",
      );
    if (this.#bytes + this.#pendingBytes + bytes > this.#deps.maxBytes)
      throw new StreamFullError(
        this.#fence.taskId,
        this.name,
        `it would hold more than ${this.#deps.maxBytes} bytes (maxStreamBytes)`,
      );
    this.#pending.push(text);
    this.#pendingBytes += bytes;
    this.#arm();
  }

  async flush(): Promise<void> {
    this.#live();
    await this.commitAll();
  }

  async close(): Promise<void> {
    this.#live();
    if (this.#error) throw this.#error;
    this.#closeWanted = true;
    await this.commitAll();
  }

  /**
   * Commits everything buffered and waits; throws the writer's error, if any. Also the boundary
   * flush (context.ts, executor.ts), which runs when the invocation may already have ended.
   */
  async commitAll(): Promise<void> {
    for (let i = 0; this.dirty && !this.#error; i++) {
      if (i > 1_000_000) throw new InvalidStateError(`stream "${this.name}": commit loop did not settle`);
      if (this.#inflight) await this.#inflight;
      else this.#send();
    }
    if (this.#error) throw this.#error;
  }

  /** The interval timer: armed by the first chunk after a commit (spec §16.2). */
  #arm(): void {
    if (this.#timer !== undefined || this.#inflight) return;
    const wait = Math.max(0, this.#lastCommitAt + this.#deps.intervalMs - performance.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.#inflight && !this.#error && this.dirty) this.#send();
    }, wait);
    this.#timer.unref?.();
  }

  /** The error that failed this writer, if any. */
  get error(): RatchetError | undefined {
    return this.#error;
  }

  /** The batch in flight, if any (settled, never rejected). */
  get inflight(): Promise<void> | null {
    return this.#inflight;
  }

  /**
   * spec §18.10: hands what is buffered to a step's commit, as this writer's batch in flight (the
   * interval timer stops); `settle` reports the commit's answer for it and waits until the writer
   * took it in. Null when there is nothing to send, a batch is in flight or the writer failed.
   */
  handOver(): HandedBatch | null {
    if (this.#inflight || this.#error || !this.dirty) return null;
    let item: StreamAppend | undefined;
    let answer!: (r: StreamAppendResult | Error) => void;
    const answered = new Promise<StreamAppendResult>((resolve, reject) => {
      answer = (r) => (typeof r === "string" ? resolve(r) : reject(r));
    });
    this.#send((i) => {
      item = i;
      return answered;
    });
    const inflight = this.#inflight!;
    return {
      writer: this,
      item: item!,
      settle: (r) => {
        answer(r);
        return inflight;
      },
    };
  }

  /** Sends what is buffered as one batch at the committed length (by the append batcher unless `via`). */
  #send(via?: (item: StreamAppend) => Promise<StreamAppendResult>): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const chunks = this.#pending;
    const bytes = this.#pendingBytes;
    const close = this.#closeWanted;
    this.#pending = [];
    this.#pendingBytes = 0;
    const item: StreamAppend = {
      fence: this.#fence,
      name: this.name,
      expect: this.#length,
      chunks,
      bytes,
      close,
      maxBytes: this.#deps.maxBytes,
    };
    this.#inflight = (via ? via(item) : this.#deps.appends.submit(item)).then(
      (r) => this.#settled(r, chunks.length, bytes, close),
      (e) => this.#fail(e instanceof RatchetError ? e : new StoreError(String(e), { cause: e })),
    );
  }

  #settled(r: StreamAppendResult, n: number, bytes: number, close: boolean): void {
    this.#inflight = null;
    this.#lastCommitAt = performance.now();
    const task = this.#fence.taskId;
    switch (r) {
      case "ok":
        this.#length += n;
        this.#bytes += bytes;
        if (close) this.#closedStored = true;
        if (n > 0 || close) this.#deps.appended(task, this.name);
        if (this.#pending.length > 0) this.#arm();
        return;
      case "lease_lost": {
        const e = new LeaseLostError(task, this.#fence.token);
        this.#fail(e);
        this.#lost(e);
        return;
      }
      case "closed":
        this.#fail(new StreamClosedError(task, this.name));
        return;
      case "full":
        this.#fail(
          new StreamFullError(task, this.name, `past ${this.#deps.maxBytes} bytes (maxStreamBytes)`),
        );
        return;
      case "too_many":
        this.#fail(
          new StreamFullError(task, this.name, `a task has at most ${MAX_STREAMS_PER_TASK} streams`),
        );
        return;
      case "conflict":
        this.#fail(
          new InvalidStateError(
            `stream "${this.name}" of task ${task} was written by someone else (offset moved)`,
          ),
        );
    }
  }

  #fail(e: RatchetError): void {
    this.#inflight = null;
    this.#error ??= e;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#closeWanted = this.#closedStored;
  }
}

/** A writer's batch handed to a step's commit (spec §18.10). */
export interface HandedBatch {
  readonly writer: Writer;
  readonly item: StreamAppend;
  /** The commit's answer for this batch, or its failure; resolves once the writer took it in. */
  settle(r: StreamAppendResult | Error): Promise<void>;
}

/**
 * The writers of one invocation, by name; made on the first ctx.stream call (most tasks never
 * stream, and pay nothing).
 */
export class InvocationStreams {
  readonly #writers = new Map<string, Promise<Writer>>();
  readonly #open: Writer[] = [];

  constructor(
    readonly fence: Fence,
    readonly deps: StreamDeps,
    readonly live: () => void,
    readonly lost: (e: LeaseLostError) => void,
    /** The task never started before this claim (ClaimedTask.fresh): it has no stream yet. */
    readonly fresh = false,
  ) {}

  /** spec §16.1: the writer of `name`, the same one for every call in this invocation. */
  open(name: unknown): Promise<Writer> {
    const n = checkName(name, "stream name");
    let w = this.#writers.get(n);
    if (!w) {
      // Only a holder writes a stream, so a task claimed for the first time has none: no read (one
      // round trip less per model turn of a fresh task on PostgreSQL).
      const info = this.fresh
        ? Promise.resolve(null)
        : retryStore(() => this.deps.store.streamInfo(this.fence.taskId, n));
      w = info.then((info) => {
        const writer = new Writer(n, info, this.fence, this.deps, this.live, this.lost);
        this.#open.push(writer);
        return writer;
      });
      // A failed open is not cached: the next call tries again.
      w.catch(() => this.#writers.delete(n));
      this.#writers.set(n, w);
    }
    return w;
  }

  get dirty(): boolean {
    for (const w of this.#open) if (w.dirty) return true;
    return false;
  }

  /**
   * spec §18.10: every writer's buffered chunks, as batches for a step's commit to carry. Batches in
   * flight are waited for first (one per writer, spec §16.4); a writer that failed throws its error,
   * as the boundary flush would.
   */
  async handOver(): Promise<HandedBatch[]> {
    for (let i = 0; ; i++) {
      const inflight = this.#open.map((w) => w.inflight).filter((p) => p !== null);
      if (inflight.length === 0) break;
      if (i > 1_000) throw new InvalidStateError("stream batches in flight did not settle");
      await Promise.all(inflight);
    }
    for (const w of this.#open) if (w.error) throw w.error;
    const out: HandedBatch[] = [];
    for (const w of this.#open) {
      const h = w.handOver();
      if (h) out.push(h);
    }
    return out;
  }

  /** The boundary flush (spec §16.2): every writer's buffered chunks committed; the first error thrown. */
  async commitAll(): Promise<void> {
    const results = await Promise.allSettled(this.#open.map((w) => w.commitAll()));
    for (const r of results) if (r.status === "rejected") throw r.reason;
  }
}
