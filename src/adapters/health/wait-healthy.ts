// The identity gate: after a spawn, poll `<basePath>/api/lifecycle/health` until the app answers, and check
// that the answer comes from THIS app instance and not from something else squatting the port.
//
// Identity is read from two places, both stamped by runlog's app SDK (src/app-sdk):
//   - the JSON body fields `appId` and `instanceId` (the seed's contract), and
//   - the response headers `x-app-id` and `x-app-instance-id` (stamped on EVERY response, so a raw app that
//     only adds the SDK's headers middleware is identified too).
// When both carry a value they must agree. Verdicts (the seed's verifyHealthIdentity):
//   match     appId and instanceId present and equal to the spawn's
//   legacy    neither present anywhere (an app without the SDK): accepted, with a warning
//   mismatch  anything else — a wrong value, a conflicting value, or only one of the two present
//   timeout   no 2xx answer (and no identity claim) before timeoutMs
// A non-2xx answer that carries identity is judged like a 2xx one; without identity it is "not ready yet".

import { httpRequest, type HttpAnswer } from './http.ts';

export const IDENTITY_HEADERS = { appId: 'x-app-id', instanceId: 'x-app-instance-id' } as const;

export interface WaitHealthyOptions {
  host: string;
  port: number;
  /** Full request path, e.g. lifecyclePath(manifest.lifecycle.basePath, 'health'). */
  path: string;
  appId: string;
  instanceId: string;
  timeoutMs: number;
  intervalMs: number;
  /** Prefix of messages, e.g. '[ProotRunner]'. */
  label?: string;
  /** Stops polling (e.g. the child exited); the result is then `aborted`. */
  signal?: AbortSignal;
}

export interface Claim {
  appId: string | null;
  instanceId: string | null;
}

export type HealthVerdict =
  | { kind: 'match'; status: number }
  | { kind: 'legacy'; status: number; message: string }
  | { kind: 'mismatch'; status: number; claimedApp: string | null; claimedInstance: string | null; message: string }
  | { kind: 'timeout'; lastError: string; message: string }
  | { kind: 'aborted'; message: string };

export type HealthResult = HealthVerdict & { attempts: number; elapsedMs: number };

const header = (h: HttpAnswer['headers'], name: string): string | null => {
  const v = h[name];
  return typeof v === 'string' && v !== '' ? v : Array.isArray(v) && v[0] ? v[0] : null;
};

/** What an answer claims: body fields and headers merged; `conflict` when they disagree. */
export function readClaim(answer: HttpAnswer): Claim & { conflict: string | null } {
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(answer.body);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: identity can still come from the headers
  }
  const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
  const pick = (field: keyof Claim, headerName: string): [string | null, string | null] => {
    const b = str(body[field]);
    const h = header(answer.headers, headerName);
    if (b !== null && h !== null && b !== h) return [b, `body ${field}=${b} but header ${headerName}=${h}`];
    return [b ?? h, null];
  };
  const [appId, c1] = pick('appId', IDENTITY_HEADERS.appId);
  const [instanceId, c2] = pick('instanceId', IDENTITY_HEADERS.instanceId);
  return { appId, instanceId, conflict: c1 ?? c2 };
}

/** The seed's message: `[ProotRunner] com.aura.foo on port 4003: health identity mismatch (expected appId=…, got appId=…). …` */
export function mismatchMessage(
  label: string,
  appId: string,
  instanceId: string,
  port: number,
  claim: Claim,
  conflict: string | null = null,
): string {
  const detail = conflict
    ? `conflicting identity: ${conflict}`
    : claim.appId !== appId
      ? `expected appId=${appId}, got appId=${claim.appId ?? '<none>'}`
      : `expected instanceId=${instanceId}, got instanceId=${claim.instanceId ?? '<none>'}`;
  return `${label} ${appId} on port ${port}: health identity mismatch (${detail}). Another process is likely squatting this port.`;
}

/** Judges one answer; null means "not ready yet, keep polling". */
export function judgeAnswer(
  answer: HttpAnswer,
  o: Pick<WaitHealthyOptions, 'appId' | 'instanceId' | 'port' | 'label'>,
): HealthVerdict | null {
  const label = o.label ?? '[runlog]';
  const claim = readClaim(answer);
  const ok = answer.status >= 200 && answer.status < 300;
  if (claim.appId === null && claim.instanceId === null) {
    if (!ok) return null;
    return {
      kind: 'legacy',
      status: answer.status,
      message:
        `${label} ${o.appId} on port ${o.port}: health answer carries no identity ` +
        '(legacy app without the runlog SDK); accepted without verification',
    };
  }
  if (!claim.conflict && claim.appId === o.appId && claim.instanceId === o.instanceId)
    return ok ? { kind: 'match', status: answer.status } : null;
  return {
    kind: 'mismatch',
    status: answer.status,
    claimedApp: claim.appId,
    claimedInstance: claim.instanceId,
    message: mismatchMessage(label, o.appId, o.instanceId, o.port, claim, claim.conflict),
  };
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/** Polls until match / legacy / mismatch, the timeout, or the abort signal. Never throws. */
export async function waitHealthy(o: WaitHealthyOptions): Promise<HealthResult> {
  const started = performance.now();
  const label = o.label ?? '[runlog]';
  let attempts = 0;
  let lastError = 'no attempt made';
  for (;;) {
    const elapsed = performance.now() - started;
    if (o.signal?.aborted) {
      return {
        kind: 'aborted',
        message: `${label} ${o.appId}: health wait aborted (${String(o.signal.reason ?? 'aborted')})`,
        attempts,
        elapsedMs: elapsed,
      };
    }
    if (elapsed >= o.timeoutMs && attempts > 0) {
      return {
        kind: 'timeout',
        lastError,
        message: `${label} ${o.appId} on port ${o.port}: not healthy after ${o.timeoutMs} ms (GET ${o.path}: ${lastError})`,
        attempts,
        elapsedMs: elapsed,
      };
    }
    attempts++;
    try {
      const answer = await httpRequest({
        host: o.host,
        port: o.port,
        method: 'GET',
        path: o.path,
        timeoutMs: Math.max(200, Math.min(2_000, o.timeoutMs - elapsed)),
        maxBody: 64 * 1024,
      });
      const verdict = judgeAnswer(answer, { ...o, label });
      if (verdict) return { ...verdict, attempts, elapsedMs: performance.now() - started };
      lastError = `HTTP ${answer.status}`;
    } catch (e) {
      lastError = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    }
    await sleep(o.intervalMs, o.signal);
  }
}
