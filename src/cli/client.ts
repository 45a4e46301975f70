// How the mutating CLI commands reach the supervisor: `runlog serve` records its URL in
// $RUNLOG_HOME/server.json (0600) and the API token in $RUNLOG_HOME/token (0600).
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assertDidCacheTtl, type AtprotoReaderOptions } from '../adapters/atproto/index.ts';
import { RunlogError, ValidationError } from '../domain/errors.ts';
import { tokenPath } from '../server/token.ts';

export interface ServerInfo {
  url: string;
  pid: number;
}

const infoPath = (home: string) => join(home, 'server.json');

export function writeServerInfo(home: string, info: ServerInfo): void {
  writeFileSync(infoPath(home), `${JSON.stringify(info)}\n`, { mode: 0o600 });
}

export function removeServerInfo(home: string, pid: number): void {
  try {
    const cur = JSON.parse(readFileSync(infoPath(home), 'utf8')) as ServerInfo;
    if (cur.pid === pid) rmSync(infoPath(home), { force: true });
  } catch {
    /* already gone */
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** The running supervisor of this home, or null (a stale server.json of a dead process is ignored). */
export function findServer(home: string): (ServerInfo & { token: string }) | null {
  if (!existsSync(infoPath(home))) return null;
  let info: ServerInfo;
  try {
    info = JSON.parse(readFileSync(infoPath(home), 'utf8')) as ServerInfo;
  } catch {
    return null;
  }
  if (!alive(info.pid) || !existsSync(tokenPath(home))) return null;
  return { ...info, token: readFileSync(tokenPath(home), 'utf8').trim() };
}

export function requireServer(home: string): ServerInfo & { token: string } {
  const s = findServer(home);
  if (!s) throw new RunlogError('NO_SUPERVISOR', `no supervisor is running for ${home}: start one with \`runlog serve\` (instances live as long as their supervisor)`);
  return s;
}

/** One API call; the server's `{ error: { code, message } }` becomes a RunlogError with that code. */
export async function callApi<T>(server: ServerInfo & { token: string }, method: string, path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(new URL(path, server.url), {
      method,
      headers: { authorization: `Bearer ${server.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch (err) {
    throw new RunlogError('NO_SUPERVISOR', `the supervisor at ${server.url} does not answer (${(err as Error).message}); is \`runlog serve\` running?`);
  }
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    throw new RunlogError('BAD_RESPONSE', `${method} ${path}: HTTP ${res.status}, not JSON`);
  }
  if (!res.ok) {
    const e = (json as { error?: { code?: string; message?: string; issues?: string[] } })?.error;
    if (e?.issues) throw new ValidationError(e.code ?? 'INVALID', e.message ?? 'invalid', e.issues);
    throw new RunlogError(e?.code ?? `HTTP_${res.status}`, e?.message ?? `${method} ${path}: HTTP ${res.status}`);
  }
  return json as T;
}

/** AT Protocol settings from flags and environment (RUNLOG_PLC_URL, RUNLOG_FETCH_MODE, RUNLOG_DID_CACHE_TTL_MS). */
export function atprotoOptions(plc?: string, env: NodeJS.ProcessEnv = process.env): AtprotoReaderOptions {
  const plcUrl = plc ?? env.RUNLOG_PLC_URL;
  const mode = env.RUNLOG_FETCH_MODE === 'cid' ? 'cid' : 'strict';
  const ttl = env.RUNLOG_DID_CACHE_TTL_MS;
  // A malformed value is an error, never a silent fallback to the default.
  const didCacheTtlMs = ttl === undefined || ttl === '' ? undefined : assertDidCacheTtl(/^\d+$/.test(ttl) ? Number(ttl) : ttl);
  return { mode, ...(plcUrl ? { plcUrl } : {}), ...(didCacheTtlMs !== undefined ? { didCacheTtlMs } : {}) };
}
