/** Retry, abort, and send a signal: each one POST to the API; the stream shows what follows. */
import { useState } from "preact/hooks";
import { call } from "../api.js";
import type { TaskRecord } from "../types.js";

export function Actions({ task, onDone }: { task: TaskRecord; onDone: () => void }) {
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [signal, setSignal] = useState(task.eventName ?? "");
  const [payload, setPayload] = useState("");

  const run = async (what: string, fn: () => Promise<string>) => {
    setBusy(true);
    try {
      setMessage({ ok: true, text: await fn() });
      onDone();
    } catch (e) {
      setMessage({ ok: false, text: `${what} refused: ${(e as Error).message}` });
    } finally {
      setBusy(false);
    }
  };

  const retry = () =>
    run("retry", async () => {
      await call(`/api/tasks/${task.id}/retry`, { method: "POST" });
      return "Retried: the task is pending again.";
    });
  const abort = () =>
    run("abort", async () => {
      const r = await call<{ state: string }>(`/api/tasks/${task.id}/abort`, { method: "POST" });
      return `Abort: ${r.state}.`;
    });
  const send = (e: Event) => {
    e.preventDefault();
    void run("signal", async () => {
      let value: unknown = null;
      if (payload.trim() !== "") {
        try {
          value = JSON.parse(payload);
        } catch {
          throw new Error("the payload is not valid JSON");
        }
      }
      const r = await call<{ first: boolean; woken: number }>(`/api/signals/${encodeURIComponent(signal)}`, {
        json: { payload: value },
      });
      return `Signal ${signal} sent${r.first ? "" : " (not the first: the first one wins)"}; ${r.woken} task(s) woken.`;
    });
  };

  const terminal = task.status === "terminal";
  return (
    <section class="actions card" data-section="actions">
      <button type="button" onClick={retry} disabled={busy || !terminal} data-action="retry">
        Retry
      </button>{" "}
      <button type="button" onClick={abort} disabled={busy || terminal} data-action="abort" class="danger">
        Abort
      </button>
      <form class="signal" onSubmit={send}>
        <label>
          Signal{" "}
          <input
            name="signal"
            value={signal}
            placeholder="event name"
            onInput={(e) => setSignal((e.target as HTMLInputElement).value)}
          />
        </label>{" "}
        <label>
          payload{" "}
          <input
            name="payload"
            value={payload}
            placeholder='JSON, e.g. {"by":"ana"}'
            onInput={(e) => setPayload((e.target as HTMLInputElement).value)}
          />
        </label>{" "}
        <button type="submit" disabled={busy || signal.trim() === ""} data-action="signal">
          Send
        </button>
      </form>
      {message && (
        <p class={message.ok ? "ok" : "problem"} role="status" data-field="action-result">
          {message.text}
        </p>
      )}
    </section>
  );
}
