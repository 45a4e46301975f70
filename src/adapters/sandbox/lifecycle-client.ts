// Lifecycle hooks: POST <basePath>/api/lifecycle/<hook> on the app, with a JSON body.

import { lifecyclePath } from '../../domain/manifest.ts';
import { httpRequest } from '../health/http.ts';
import { SandboxError } from './errors.ts';

export interface HookTarget {
  instanceId: string;
  appId: string;
  host: string;
  port: number;
  basePath: string;
}

const NOT_IMPLEMENTED = new Set([404, 405, 501]);

export async function postHook(
  label: string,
  t: HookTarget,
  hook: string,
  body: unknown,
  optional: boolean,
  timeoutMs: number,
): Promise<unknown | null> {
  if (!/^[A-Za-z][A-Za-z0-9]{0,63}$/.test(hook))
    throw new SandboxError('LIFECYCLE_FAILED', `${label} ${t.appId}: '${hook}' is not a lifecycle hook name`);
  const path = lifecyclePath(t.basePath, hook);
  let answer;
  try {
    answer = await httpRequest({ host: t.host, port: t.port, method: 'POST', path, body: body ?? {}, timeoutMs });
  } catch (e) {
    throw new SandboxError(
      'LIFECYCLE_FAILED',
      `${label} ${t.appId} (${t.instanceId}): POST ${path} failed: ${(e as Error).message}`,
      { hook, instanceId: t.instanceId },
      { cause: e },
    );
  }
  if (optional && NOT_IMPLEMENTED.has(answer.status)) return null;
  if (answer.status < 200 || answer.status >= 300) {
    throw new SandboxError(
      'LIFECYCLE_FAILED',
      `${label} ${t.appId} (${t.instanceId}): POST ${path} answered HTTP ${answer.status}: ${answer.body.slice(0, 300)}`,
      { hook, instanceId: t.instanceId, status: answer.status },
    );
  }
  if (answer.body.trim() === '') return null;
  try {
    return JSON.parse(answer.body) as unknown;
  } catch {
    return answer.body;
  }
}
