/**
 * A signed POST per the Standard Webhooks specification (spec §21.14), shared
 * by the webhook sink and the webhook notifier. The `standardwebhooks` package
 * signs; every current secret signs at once, so a receiver that holds either
 * the old or the new secret verifies during a rotation.
 *
 * Secrets live only in the signers built here: no error, status or log line
 * carries a secret or the URL's credentials or query (`redactUrl`).
 */
import { Webhook } from "standardwebhooks";
import type { Clock } from "../../core/clock.js";
import { ConfigError } from "../../errors.js";
import { parseRetryAfter } from "../../models/classify.js";
import { DeliveryError } from "./types.js";

export const MAX_SECRETS = 10;

/** The statuses of 4xx that a later try may still get through (spec §21.14). */
const RETRYABLE_4XX = new Set([408, 409, 425, 429]);

/** A URL as it may be shown: scheme, host and path; no credentials, query or fragment. */
export function redactUrl(u: URL): string {
  return `${u.protocol}//${u.host}${u.pathname}`;
}

export interface SignedTarget {
  /** Without credentials: those travel as a Basic `authorization` header, never in a URL text. */
  readonly url: URL;
  readonly auth: string | null;
  /** For status and errors: `redactUrl(url)`. */
  readonly shown: string;
  readonly signers: readonly Webhook[];
}

/**
 * Checks a webhook's URL (http or https) and secrets (1–10, each a Standard
 * Webhooks secret, `whsec_` + base64) once, at configuration; a bad one is a
 * ConfigError that names neither the secret nor the URL's query.
 */
export function signedTarget(what: string, url: string, secrets: readonly string[]): SignedTarget {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`${what}: the url is not a URL`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new ConfigError(`${what}: the url must be http or https (got ${u.protocol})`);
  if (!Array.isArray(secrets) || secrets.length === 0 || secrets.length > MAX_SECRETS)
    throw new ConfigError(`${what}: give 1–${MAX_SECRETS} signing secrets (several during a rotation)`);
  let auth: string | null = null;
  if (u.username || u.password) {
    const pair = `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`;
    auth = `Basic ${Buffer.from(pair).toString("base64")}`;
    u.username = "";
    u.password = "";
  }
  const signers = secrets.map((s, i) => {
    try {
      if (typeof s !== "string" || s.length === 0) throw new Error("empty");
      return new Webhook(s);
    } catch {
      throw new ConfigError(`${what}: secret ${i + 1} is not a Standard Webhooks secret (whsec_ + base64)`);
    }
  });
  return { url: u, auth, shown: redactUrl(u), signers };
}

/** The three Standard Webhooks headers for `body`, signed by every secret (space-separated, spec §21.14). */
export function signHeaders(t: SignedTarget, id: string, body: string, at: Date): Record<string, string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": t.signers.map((w) => w.sign(id, at, body)).join(" "),
  };
}

/**
 * POSTs `body` signed, under `signal`. Resolves on 2xx. Rejects with a
 * DeliveryError: retryable for a network failure, a timeout, 5xx, 408, 409,
 * 425 and 429 (with the receiver's Retry-After), not retryable for any other
 * status (spec §21.14). Redirects are not followed (a moved receiver is a
 * configuration to fix, not something to retry).
 */
export async function postSigned(
  t: SignedTarget,
  id: string,
  body: string,
  clock: Clock,
  signal: AbortSignal,
): Promise<void> {
  const headers = {
    "content-type": "application/json",
    "user-agent": "ratchet-outbox",
    ...signHeaders(t, id, body, new Date(clock.now())),
    ...(t.auth ? { authorization: t.auth } : {}),
  };
  let res: Response;
  try {
    res = await fetch(t.url, { method: "POST", headers, body, signal, redirect: "manual" });
  } catch (e) {
    const why = signal.aborted
      ? "timed out or stopped"
      : ((e as Error).cause as Error)?.message || (e as Error).message;
    // A driver's message may quote the URL: only its shown form leaves here.
    const text = String(why).split(t.url.href).join(t.shown);
    throw new DeliveryError(`POST ${t.shown}: ${text}`, { retryable: true });
  }
  const text = await res.text().catch(() => "");
  if (res.status >= 200 && res.status < 300) return;
  const h: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    h[k] = v;
  });
  const retryable = res.status >= 500 || RETRYABLE_4XX.has(res.status);
  const after = parseRetryAfter(h, clock.now());
  throw new DeliveryError(`POST ${t.shown}: HTTP ${res.status} ${text.slice(0, 200)}`.trim(), {
    retryable,
    retryAfterMs: after ?? undefined,
  });
}
