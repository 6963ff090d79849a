/**
 * Who may call the server (see docs/http.md, "Auth").
 *
 * Two modes, chosen once at createServer():
 * - token: every /api/* and /metrics request needs `Authorization: Bearer
 *   <token>`; compared in constant time over SHA-256 digests, so neither the
 *   content nor the length of the token leaks through timing.
 * - no token: the server binds to loopback only (refused otherwise, at
 *   listen), and answers only requests whose Host header names loopback. The
 *   Host check stops DNS rebinding: a web page whose domain re-resolves to
 *   127.0.0.1 sends its own Host and is refused. An absolute-form request
 *   target's authority counts as the host too (RFC 9112 §3.2.2).
 *
 * In both modes a request that changes something must be
 * `Content-Type: application/json`: browsers cannot send that cross-origin
 * without a CORS preflight, which this server never grants, so a page the
 * operator visits cannot enqueue or abort through their browser.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { ConfigError } from "../errors.js";
import { HttpError } from "./errors.js";

/** A token shorter than this is refused at createServer(): guessing it must not be practical. */
export const MIN_TOKEN_LENGTH = 16;

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "::1", "[::1]", "localhost"]);

export function isLoopback(host: string): boolean {
  return LOOPBACK_HOSTS.has(host.toLowerCase()) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** Misconfiguration fails before the server listens. */
export function checkAuthConfig(host: string, token: string | undefined): void {
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH)
    throw new ConfigError(`the API token must be at least ${MIN_TOKEN_LENGTH} characters`);
  if (token === undefined && !isLoopback(host))
    throw new ConfigError(
      `refusing to listen on ${host} without a token: set RATCHET_TOKEN, or listen on 127.0.0.1`,
    );
}

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/** Returns a checker for the Authorization header; throws HttpError 401 when it does not match. */
export function bearerCheck(token: string): (header: string | undefined) => void {
  const expected = digest(token);
  return (header) => {
    const m = /^Bearer ([\x21-\x7e]+)$/.exec(header ?? "");
    if (!m || !timingSafeEqual(digest(m[1]!), expected))
      throw new HttpError(401, "RATCHET_UNAUTHORIZED", "missing or wrong bearer token");
  };
}

/** Host header name without the port ("[::1]:4680" → "[::1]"). */
export function hostName(header: string | undefined): string {
  if (!header) return "";
  if (header.startsWith("[")) return header.slice(0, header.indexOf("]") + 1);
  const i = header.lastIndexOf(":");
  return i === -1 ? header : header.slice(0, i);
}

/**
 * The host a request names. An absolute-form request target (`GET http://h/p HTTP/1.1`, which
 * proxies send) carries its own authority, and RFC 9112 §3.2.2 says a server must use it and
 * ignore Host; an origin-form target (`/p`) leaves Host in force. Anything else (authority-form,
 * asterisk-form, a target that does not parse) names no host this server answers: "".
 */
export function requestHosts(target: string | undefined, header: string | undefined): string[] {
  const hosts = [hostName(header)];
  if (target === undefined || target.startsWith("/")) return hosts;
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(target)) return [...hosts, ""];
  try {
    return [...hosts, new URL(target).hostname];
  } catch {
    return [...hosts, ""];
  }
}

/**
 * Without a token only requests to a loopback host are served (DNS rebinding): the Host header
 * and, for an absolute-form request, the target's authority (RFC 9112 §3.2.2) must both name
 * loopback, so `GET http://evil.example.com/…` with `Host: 127.0.0.1` is refused too.
 */
export function checkLoopbackHost(header: string | undefined, target?: string): void {
  if (!requestHosts(target, header).every(isLoopback))
    throw new HttpError(
      403,
      "RATCHET_FORBIDDEN_HOST",
      "this server has no token and answers only requests to a loopback host name",
    );
}

/** State-changing requests must be JSON (see the module comment). */
export function checkJsonContentType(header: string | undefined): void {
  const type = (header ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/json")
    throw new HttpError(
      415,
      "RATCHET_UNSUPPORTED_MEDIA_TYPE",
      "requests that change something must have Content-Type: application/json",
    );
}
