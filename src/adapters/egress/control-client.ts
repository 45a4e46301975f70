// The supervisor's side of the egress proxy's control API (proxy/control-api.ts): register an execution's grant on
// the proxy's address in its network, remove it with its usage, and read the proxy's connection reports.
//
// The answers' shapes are the proxy's own types; an error answer becomes a RunlogError with the proxy's code (a
// code of the one table), and a proxy that does not answer in time is NETWORK_TIMEOUT.
import type { NetworkGrant } from '../../domain/at-run/egress-grant.ts';
import { isErrorCode } from '../../domain/error-codes.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { RegisteredGrant } from './proxy/grant-registry.ts';
import type { Usage } from './proxy/grant-state.ts';
import type { ReportPage } from './proxy/reports.ts';

export type { EgressReport, ReportPage } from './proxy/reports.ts';
export type { RegisteredGrant } from './proxy/grant-registry.ts';
export type { Usage as EgressUsage } from './proxy/grant-state.ts';

export interface EgressControl {
  health(): Promise<boolean>;
  putGrant(key: string, address: string, grant: NetworkGrant): Promise<RegisteredGrant>;
  deleteGrant(key: string): Promise<{ key: string; address: string; usage: Usage }>;
  grants(): Promise<{ key: string; address: string; usage: Usage }[]>;
  /** Reports after `after`; waits up to `waitMs` (at most 30 s) for one when there is none yet. */
  reports(opts?: { after?: number; waitMs?: number; limit?: number; key?: string }): Promise<ReportPage>;
}

/** A client of the control API at `baseUrl` (`http://ip:port`), with its bearer token. */
export function egressControl(opts: { baseUrl: string; token: string; timeoutMs?: number }): EgressControl {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  async function call<T>(method: string, path: string, body?: unknown, waitMs = 0): Promise<T> {
    let res: Response;
    try {
      res = await fetch(new URL(path, opts.baseUrl), {
        method,
        headers: {
          authorization: `Bearer ${opts.token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(timeoutMs + waitMs),
      });
    } catch (err) {
      throw new RunlogError('NETWORK_TIMEOUT', `the egress proxy at ${opts.baseUrl} did not answer`, undefined, {
        cause: err,
      });
    }
    const answer = (await res.json().catch(() => ({}))) as {
      error?: { code?: unknown; message?: string; issues?: string[] };
    };
    if (res.ok) return answer as T;
    const code = isErrorCode(answer.error?.code) ? answer.error.code : 'BAD_RESPONSE';
    throw new RunlogError(code, `egress proxy: ${answer.error?.message ?? `HTTP ${res.status}`}`, {
      status: res.status,
      ...(answer.error?.issues ? { issues: answer.error.issues } : {}),
    });
  }
  return {
    async health() {
      try {
        return (await call<{ ok: boolean }>('GET', '/health')).ok === true;
      } catch {
        return false;
      }
    },
    putGrant: (key, address, grant) => call('PUT', `/grants/${encodeURIComponent(key)}`, { address, grant }),
    deleteGrant: (key) => call('DELETE', `/grants/${encodeURIComponent(key)}`),
    grants: async () =>
      (await call<{ grants: { key: string; address: string; usage: Usage }[] }>('GET', '/grants')).grants,
    reports(q = {}) {
      const params = new URLSearchParams();
      if (q.after !== undefined) params.set('after', String(q.after));
      if (q.waitMs !== undefined) params.set('wait', String(q.waitMs));
      if (q.limit !== undefined) params.set('limit', String(q.limit));
      if (q.key !== undefined) params.set('key', q.key);
      return call('GET', `/reports?${params}`, undefined, q.waitMs ?? 0);
    },
  };
}
