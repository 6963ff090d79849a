/** Asks once for the server's token; kept in sessionStorage for this tab (api.ts). */
import { useState } from "preact/hooks";
import { ApiError, call, setToken } from "../api.js";

export function TokenPrompt({ onAccepted }: { onAccepted: () => void }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setToken(value.trim());
    try {
      await call("/api/stats");
      onAccepted();
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? "That token was refused." : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="token card" onSubmit={submit} data-view="token">
      <h2>This server needs a token</h2>
      <p>
        Enter the value of <code>RATCHET_TOKEN</code>. It is kept for this tab only and sent as{" "}
        <code>Authorization: Bearer</code> with every request.
      </p>
      <label>
        Token{" "}
        <input
          type="password"
          name="token"
          autoComplete="off"
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
        />
      </label>{" "}
      <button type="submit" disabled={busy || value.trim() === ""}>
        Open
      </button>
      {error && (
        <p class="problem" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}
