// Reading dockerode's answers: an error's HTTP status and the Engine's message, a socket that is gone, a request cut
// at its timeout, label filters and the Engine's zero time. Used by dockerode-engine.ts to map each failure to a
// typed error.
import type Docker from 'dockerode';
import { ZERO_TIME } from './docker-port.ts';

export type LabelFilter = Record<string, string | true>;

export const labelFilters = (labels: LabelFilter): string[] =>
  Object.entries(labels).map(([k, v]) => (v === true ? k : `${k}=${v}`));

export function statusOf(err: unknown): number | undefined {
  const s = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

export function messageOf(err: unknown): string {
  const json = (err as { json?: unknown } | null)?.json;
  if (json && typeof json === 'object' && typeof (json as { message?: unknown }).message === 'string') {
    return (json as { message: string }).message;
  }
  if (Buffer.isBuffer(json)) {
    const text = json.toString('utf8').trim();
    if (text) {
      try {
        const parsed = JSON.parse(text) as { message?: string };
        if (typeof parsed.message === 'string') return parsed.message;
      } catch {
        return text;
      }
    }
  }
  return err instanceof Error ? err.message : String(err);
}

export function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOENT' || code === 'ECONNREFUSED' || code === 'EACCES' || code === 'ECONNRESET' || code === 'EPIPE';
}

/** Set on an error of a request that docker-modem ended at its timeout (it destroys the socket: "socket hang up"). */
export const TIMED_OUT = Symbol('runlog.docker.timedOut');

/**
 * Tags the errors of requests that ran for the client's whole timeout, so #fail can tell a slow or hung daemon
 * (DockerTimeoutError) from one that is gone (DockerUnavailableError): both end in a reset socket.
 */
export function tagTimeouts(docker: Docker, timeoutMs: number): void {
  const modem = docker.modem;
  const dial = modem.dial.bind(modem);
  modem.dial = (options, cb) => {
    const started = performance.now();
    dial(options, (err, data) => {
      if (err && typeof err === 'object' && performance.now() - started >= timeoutMs)
        (err as { [TIMED_OUT]?: boolean })[TIMED_OUT] = true;
      cb?.(err, data);
    });
  };
}

export const timeOrNull = (t: unknown): string | null =>
  typeof t === 'string' && t !== '' && t !== ZERO_TIME ? t : null;
