// How the mutating CLI commands reach the supervisor: `runlog serve` (the log's writer-lock holder, and only
// it) records its URL in $RUNLOG_HOME/server.json (0600) and the API token is $RUNLOG_HOME/token (0600).
//
// server.json decides where the bearer token is sent, so it is trusted only when this user wrote it: a regular
// file (not a symlink) owned by this user and writable by no one else, naming a loopback IP address. Anything
// else is refused (SERVER_INFO_UNTRUSTED) before a connection is made. One whose process is gone — or whose pid
// now belongs to another process (start time differs) — is stale and ignored.
import { closeSync, lstatSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import { assertDidCacheTtl, type AtprotoReaderOptions } from '../adapters/atproto/index.ts';
import { isErrorCode } from '../domain/error-codes.ts';
import { RunlogError, ServerInfoUntrustedError, ValidationError } from '../domain/errors.ts';
import { DEADLINE_HEADER } from '../server/deadline.ts';
import { isLoopbackAddress } from '../server/listen.ts';
import { tokenPath } from '../server/token.ts';
import { checkAnswer, notASupervisor, type AnswerShape } from './api-answers.ts';

export interface ServerInfo {
  url: string;
  pid: number;
  /** The process's start time (/proc/<pid>/stat field 22), so a reused pid is not taken for the supervisor. */
  pidStart?: string | null;
  /** The log this supervisor writes. */
  db?: string;
}

export const serverInfoPath = (home: string): string => join(home, 'server.json');

/** The kernel's start time of a process (clock ticks since boot), or null where /proc does not tell. */
export function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Written by the writer-lock holder only (runlog serve), atomically: a 0600 temp file renamed into place. */
export function writeServerInfo(home: string, info: Omit<ServerInfo, 'pidStart'>): void {
  const path = serverInfoPath(home);
  const tmp = `${path}.${process.pid}.tmp`;
  rmSync(tmp, { force: true });
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, `${JSON.stringify({ ...info, pidStart: processStart(info.pid) })}\n`);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/** Removes server.json if it is still this process's (a later supervisor's is left alone). */
export function removeServerInfo(home: string, pid: number): void {
  try {
    const cur = JSON.parse(readFileSync(serverInfoPath(home), 'utf8')) as ServerInfo;
    if (cur.pid === pid) rmSync(serverInfoPath(home), { force: true });
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

const myUid = (): number | null => (typeof process.getuid === 'function' ? process.getuid() : null);

/** Throws ServerInfoUntrustedError unless the file is this user's own and no one else can write it. */
function assertOwnFile(path: string, what: string): void {
  const st = lstatSync(path);
  if (!st.isFile())
    throw new ServerInfoUntrustedError(path, `${what} is not a regular file (a symlink or something else)`);
  const uid = myUid();
  if (uid !== null && st.uid !== uid)
    throw new ServerInfoUntrustedError(path, `${what} belongs to uid ${st.uid}, not to this user (uid ${uid})`);
  if ((st.mode & 0o022) !== 0)
    throw new ServerInfoUntrustedError(path, `${what} is writable by others (mode 0${(st.mode & 0o777).toString(8)})`);
}

/** The URL must be plain http on a loopback IP address (names are refused: what they resolve to is not ours). */
function assertLoopbackUrl(path: string, url: unknown): URL {
  let u: URL;
  try {
    u = new URL(String(url));
  } catch {
    throw new ServerInfoUntrustedError(path, `its url ${JSON.stringify(url)} is not a URL`);
  }
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (u.protocol !== 'http:' || isIP(host) === 0 || !isLoopbackAddress(host) || u.username || u.password) {
    throw new ServerInfoUntrustedError(
      path,
      `its url ${u.href} is not http on a loopback address (127.0.0.0/8 or [::1])`,
    );
  }
  return u;
}

/**
 * The running supervisor of this home, or null when there is none (no server.json, or a stale one). Throws
 * ServerInfoUntrustedError when server.json or the token file could have been written by someone else.
 */
export function findServer(home: string): (ServerInfo & { token: string }) | null {
  const path = serverInfoPath(home);
  try {
    lstatSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') throw cannotReach(home, path, code);
    return null;
  }
  assertOwnFile(path, 'server.json');
  let info: ServerInfo;
  try {
    info = JSON.parse(readFileSync(path, 'utf8')) as ServerInfo;
  } catch {
    return null; // torn or empty: not a supervisor's (it writes atomically)
  }
  if (typeof info.pid !== 'number' || !Number.isSafeInteger(info.pid) || info.pid <= 0 || !alive(info.pid)) return null;
  if (info.pidStart && processStart(info.pid) !== info.pidStart) return null; // the pid was reused
  const url = assertLoopbackUrl(path, info.url);
  const token = tokenPath(home);
  try {
    lstatSync(token);
  } catch {
    return null;
  }
  assertOwnFile(token, 'the token file');
  return { ...info, url: url.href, token: readFileSync(token, 'utf8').trim() };
}

/**
 * Another user's home (a supervisor run as root, say): whether one runs there cannot be told, so the answer is
 * that this user may not look, never "no supervisor".
 */
function cannotReach(home: string, path: string, code: string): RunlogError {
  let owner = '';
  try {
    owner = ` (${home} belongs to uid ${statSync(home).uid})`;
  } catch {
    /* the owner stays unnamed */
  }
  const uid = myUid();
  return new RunlogError(
    'PERMISSION_DENIED',
    `cannot reach the supervisor's files in ${home}: ${path} is not readable by this user` +
      `${uid === null ? '' : ` (uid ${uid})`}${owner}, ${code}. ` +
      'Run the command as the user that runs `runlog serve` there, or use a home of your own (--home, $RUNLOG_HOME)',
    { home, file: path, code },
  );
}

export function requireServer(home: string): ServerInfo & { token: string } {
  const s = findServer(home);
  if (!s)
    throw new RunlogError(
      'NO_SUPERVISOR',
      `no supervisor is running for ${home}: start one with \`runlog serve\` (instances live as long as their supervisor)`,
    );
  return s;
}

/**
 * One API call; the server's `{ error: { code, message } }` becomes a RunlogError with that code. `shape`: what
 * the caller reads of the answer (api-answers.ts), checked first; an answer without it is BAD_RESPONSE. With
 * `timeoutMs` the call carries its deadline (`runlog-deadline`, epoch ms; the supervisor refuses it once that has
 * passed) and fails with TIMEOUT when no whole answer came by then.
 */
export async function callApi<T>(
  server: ServerInfo & { token: string },
  method: string,
  path: string,
  body: unknown,
  shape: AnswerShape,
  timeoutMs?: number,
): Promise<T> {
  const signal = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
  const deadline = timeoutMs === undefined ? {} : { [DEADLINE_HEADER]: String(Date.now() + timeoutMs) };
  const timedOut = (err: unknown): boolean =>
    signal?.aborted === true && (err as Error | null)?.name === 'TimeoutError';
  const timeoutError = () =>
    new RunlogError(
      'TIMEOUT',
      `${method} ${path}: the supervisor at ${server.url} did not answer within ${timeoutMs} ms (--timeout); ` +
        'it will not act on the request after that',
      { timeoutMs },
    );
  let res: Response;
  try {
    res = await fetch(new URL(path, server.url), {
      method,
      headers: {
        authorization: `Bearer ${server.token}`,
        ...deadline,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      ...(signal ? { signal } : {}),
    });
  } catch (err) {
    if (timedOut(err)) throw timeoutError();
    throw new RunlogError(
      'NO_SUPERVISOR',
      `the supervisor at ${server.url} does not answer (${(err as Error).message}); is \`runlog serve\` running?`,
    );
  }
  let text: string;
  try {
    text = await res.text();
  } catch (err) {
    if (timedOut(err)) throw timeoutError();
    throw err;
  }
  if (!res.ok) throw apiError(res.status, text, method, path, server.url);
  let value: unknown;
  try {
    value = text ? JSON.parse(text) : null;
  } catch {
    throw notASupervisor(server.url, method, path, `HTTP ${res.status} with a body that is not JSON`);
  }
  checkAnswer(server.url, method, path, value, shape);
  return value as T;
}

/**
 * The typed error an API answer that is not ok carries (its body: `{ error: { code, message } }`). A body without
 * that error object is no runlog supervisor's: BAD_RESPONSE naming the server (`url`).
 */
export function apiError(status: number, text: string, method: string, path: string, url: string): RunlogError {
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    return notASupervisor(url, method, path, `HTTP ${status} with a body that is not JSON`);
  }
  const e = (json as { error?: { code?: string; message?: string; issues?: string[] } })?.error;
  if (typeof e !== 'object' || e === null || typeof e.code !== 'string')
    return notASupervisor(url, method, path, `HTTP ${status} without runlog's error object ({"error":{"code":…}})`);
  // The supervisor's code, kept as it is (the same table gives the same exit status); a code this CLI does not
  // know (a newer supervisor) is API_ERROR with the original code in details.
  const code = isErrorCode(e?.code) ? e.code : 'API_ERROR';
  const details = code === 'API_ERROR' ? { code: e?.code ?? null, status } : undefined;
  if (e?.issues) return new ValidationError(code, e.message ?? 'invalid', e.issues, details);
  return new RunlogError(code, e?.message ?? `${method} ${path}: HTTP ${status}`, details);
}

/** AT Protocol settings from flags and environment (RUNLOG_PLC_URL, RUNLOG_FETCH_MODE, RUNLOG_DID_CACHE_TTL_MS). */
export function atprotoOptions(plc?: string, env: NodeJS.ProcessEnv = process.env): AtprotoReaderOptions {
  const plcUrl = plc ?? env.RUNLOG_PLC_URL;
  const mode = env.RUNLOG_FETCH_MODE === 'cid' ? 'cid' : 'strict';
  const ttl = env.RUNLOG_DID_CACHE_TTL_MS;
  // A malformed value is an error, never a silent fallback to the default.
  const didCacheTtlMs =
    ttl === undefined || ttl === '' ? undefined : assertDidCacheTtl(/^\d+$/.test(ttl) ? Number(ttl) : ttl);
  // did:web on loopback / link-local hosts is refused unless the operator says otherwise (README: trust model).
  const didWebAllowLoopback = env.RUNLOG_DID_WEB_ALLOW_LOOPBACK === '1';
  return {
    mode,
    ...(plcUrl ? { plcUrl } : {}),
    ...(didCacheTtlMs !== undefined ? { didCacheTtlMs } : {}),
    ...(didWebAllowLoopback ? { didWebAllowLoopback } : {}),
  };
}
