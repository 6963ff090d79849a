/**
 * Every call the dashboard makes goes through `call`: same origin, the bearer
 * token when one was given, JSON bodies. A 401 forgets the token and tells
 * the app to ask for it again (the server may have been restarted with a new
 * one).
 *
 * The token lives in sessionStorage: it survives a reload of this tab and
 * is gone when the tab closes; it is never put in a URL.
 */

const TOKEN_KEY = "ratchet.token";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

const unauthorized = new Set<() => void>();

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** `fn` runs when a call is refused for want of a (right) token. Returns the unsubscribe. */
export function onUnauthorized(fn: () => void): () => void {
  unauthorized.add(fn);
  return () => unauthorized.delete(fn);
}

export function authHeaders(): Record<string, string> {
  const t = getToken();
  return t ? { authorization: `Bearer ${t}` } : {};
}

/** Called by every path that sees a 401: forget the token, ask again. */
export function reportUnauthorized(): void {
  setToken(null);
  for (const fn of [...unauthorized]) fn();
}

async function errorOf(res: Response): Promise<ApiError> {
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string } };
    return new ApiError(res.status, body.error?.code ?? "UNKNOWN", body.error?.message ?? res.statusText);
  } catch {
    return new ApiError(res.status, "UNKNOWN", res.statusText || `HTTP ${res.status}`);
  }
}

export async function call<T>(path: string, init: { method?: string; json?: unknown } = {}): Promise<T> {
  const headers: Record<string, string> = authHeaders();
  const method = init.method ?? (init.json === undefined ? "GET" : "POST");
  // Writes are always JSON: the server refuses anything else (its CSRF rule), even an empty body.
  if (method !== "GET") headers["content-type"] = "application/json";
  const res = await fetch(path, {
    method,
    headers,
    ...(method !== "GET" ? { body: JSON.stringify(init.json ?? {}) } : {}),
  });
  if (res.status === 401) {
    reportUnauthorized();
    throw await errorOf(res);
  }
  if (!res.ok) throw await errorOf(res);
  return (await res.json()) as T;
}

/** A query string from the defined, non-empty values. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}
