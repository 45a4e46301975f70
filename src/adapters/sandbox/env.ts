// The environment of a sandboxed app, built from an EMPTY environment: nothing of the supervisor's own
// environment (NODE_EXTRA_CA_CERTS, proxies, tokens, …) reaches the app. Exactly these variables are set;
// the shell and the engine add their usual ones (bash: PWD, SHLVL, _; proot: PWD; Docker: HOSTNAME).

import { MY_TOOLS_MOUNT } from '../tools/toolchain.ts';

/** The Debian base PATH that follows /aura/my-tools. */
export const BASE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const SANDBOX_PATH = `${MY_TOOLS_MOUNT}:${BASE_PATH}`;
export const SANDBOX_ENV_KEYS = [
  'APP_PORT',
  'APP_ID',
  'APP_INSTANCE_ID',
  'OS_API_BASE',
  'AURA_LAYER_TAG',
  'PATH',
  'HOME',
] as const;

export function sandboxEnv(o: {
  port: number;
  appId: string;
  instanceId: string;
  osApiBase: string;
  layerTag: '[proot]' | '[ctnr]';
}): Record<string, string> {
  return {
    APP_PORT: String(o.port),
    APP_ID: o.appId,
    APP_INSTANCE_ID: o.instanceId,
    OS_API_BASE: o.osApiBase,
    AURA_LAYER_TAG: o.layerTag,
    PATH: SANDBOX_PATH,
    HOME: '/root',
  };
}
