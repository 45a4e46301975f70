// The app manifest: what an app directory declares about itself in `<app-dir>/runlog.json`.
// Pure: this module only validates values handed to it. Facts that need IO (does the entrypoint file
// exist? which tools does the toolchain hold?) arrive in `ManifestContext`, gathered by the adapter that
// read the file (src/adapters/apps/load-manifest.ts).

import { ValidationError } from './errors.ts';

/** The manifest's file name inside an app directory: `<workspace>/apps/<appId>/runlog.json`. */
export const MANIFEST_FILE = 'runlog.json';
/** The entrypoint script looked for when the manifest names none. */
export const DEFAULT_ENTRYPOINT = 'entrypoint.sh';

export type SandboxKind = 'proot' | 'container';
export type AppRuntime = 'astro' | 'raw';
export type RestartPolicyName = 'never' | 'on-failure';

export interface RestartPolicy {
  policy: RestartPolicyName;
  /** How many restarts after unexpected exits before the instance stays crashed. */
  maxRestarts: number;
  /** Delay before the first restart; doubles per consecutive restart up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
}

export interface AppManifest {
  /** Reverse-DNS id (see APP_ID_GRAMMAR); equals the app directory's name. */
  appId: string;
  /** Absent in the file → 'proot' (the cheap sandbox). Unknown values are rejected, never downgraded. */
  sandbox: SandboxKind;
  /** Absent → 'astro' (the runner synthesizes an entrypoint when the app ships none). 'raw' requires one. */
  runtime: AppRuntime;
  /** Tool allowlist: names from the toolchain registry, `*` (everything), `claude-code` (alias of `claude`). */
  tools: string[];
  lifecycle: {
    /** Prefix of `/api/lifecycle/*` ('' = served at the root). Normalized: '' or '/a/b', no trailing slash. */
    basePath: string;
  };
  restart: RestartPolicy;
  /** Entrypoint script, relative to the app directory. Absent → DEFAULT_ENTRYPOINT if the app ships it. */
  entrypoint?: string;
}

export const SANDBOX_KINDS: readonly SandboxKind[] = ['proot', 'container'];
export const APP_RUNTIMES: readonly AppRuntime[] = ['astro', 'raw'];
export const RESTART_POLICIES: readonly RestartPolicyName[] = ['never', 'on-failure'];
export const DEFAULT_SANDBOX: SandboxKind = 'proot';
export const DEFAULT_RUNTIME: AppRuntime = 'astro';
export const DEFAULT_RESTART: Readonly<RestartPolicy> = {
  policy: 'on-failure',
  maxRestarts: 5,
  backoffMs: 1_000,
  maxBackoffMs: 30_000,
};

/**
 * The toolchain registry's names: every tool runlog knows how to mirror into `/aura/all-tools`
 * (src/adapters/tools/toolchain.ts builds it from what this host actually has). A manifest may name any of
 * these; a known tool the host lacks is reported at provisioning time, not as an invalid manifest.
 */
export const TOOL_CATALOG: readonly string[] = [
  'bash',
  'sh',
  'env',
  'cat',
  'ls',
  'grep',
  'sed',
  'awk',
  'find',
  'tar',
  'gzip',
  'node',
  'git',
  'curl',
  'jq',
  'docker',
  'claude',
];
export const TOOL_WILDCARD = '*';
/** Historical names kept working: `claude-code` provisions `claude`. */
export const TOOL_ALIASES: Readonly<Record<string, string>> = { 'claude-code': 'claude' };

/**
 * appId grammar (reverse DNS, lowercase):
 *   appId  = label 2*( "." label )            ; at least three labels: com.example.hello
 *   label  = lower *61( lower / digit / "-" ) ( lower / digit )   ; 1–63 chars, no leading digit/hyphen,
 *                                                                   ; no trailing hyphen
 * and at most 200 characters in total. It is used verbatim in paths, container names and labels.
 */
export const APP_ID_GRAMMAR =
  'reverse-DNS: at least 3 dot-separated labels, each [a-z][a-z0-9-]* (1-63 chars, not ending in "-"), ' +
  '200 chars max, e.g. com.example.hello';
const APP_ID_LABEL = /^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export function isValidAppId(value: unknown): value is string {
  if (typeof value !== 'string' || value.length > 200) return false;
  const labels = value.split('.');
  return labels.length >= 3 && labels.every((l) => APP_ID_LABEL.test(l));
}

/** Facts about the app directory the pure parser cannot observe itself. Omitted facts are not checked. */
export interface ManifestContext {
  /** Valid tool names (without `*` and aliases). Default: TOOL_CATALOG. */
  knownTools?: readonly string[];
  /** Whether the entrypoint file (manifest.entrypoint ?? DEFAULT_ENTRYPOINT) exists in the app directory. */
  entrypointExists?: boolean;
  /**
   * The directory the user named (e.g. the `runlog spawn <app-dir>` argument), when the manifest is validated
   * as it will live elsewhere (the workspace copy): errors name the file the user edits, not the copy.
   */
  sourceDir?: string;
}

export const runnerLabel = (sandbox: SandboxKind): string =>
  sandbox === 'container' ? '[ContainerRunner]' : '[ProotRunner]';

/** The seed's exact text for a raw app (or a declared entrypoint) without its entrypoint file. */
export function missingEntrypointMessage(
  sandbox: SandboxKind,
  appId: string,
  path: string,
  runtime: AppRuntime = 'raw',
): string {
  return runtime === 'raw'
    ? `${runnerLabel(sandbox)} app '${appId}' has runtime: 'raw' but no entrypoint file at ${path}`
    : `${runnerLabel(sandbox)} app '${appId}' declares entrypoint '${path}' but no entrypoint file is there`;
}

export const entrypointFile = (m: Pick<AppManifest, 'entrypoint'>): string => m.entrypoint ?? DEFAULT_ENTRYPOINT;

export type LifecycleHook = 'onCreate' | 'onStart' | 'onPause' | 'onResume' | 'onStop';
export const LIFECYCLE_HOOKS: readonly LifecycleHook[] = ['onCreate', 'onStart', 'onPause', 'onResume', 'onStop'];

/** `<basePath>/api/lifecycle/<hook>`; `hook` is 'health' or a lifecycle hook name. */
export const lifecyclePath = (basePath: string, hook: string): string => `${basePath}/api/lifecycle/${hook}`;

/** Expands `*` (every available tool) and aliases; keeps order, drops duplicates. */
export function expandTools(tools: readonly string[], available: readonly string[]): string[] {
  const out = new Set<string>();
  for (const t of tools) {
    if (t === TOOL_WILDCARD) available.forEach((a) => out.add(a));
    else out.add(TOOL_ALIASES[t] ?? t);
  }
  return [...out];
}

const KNOWN_FIELDS = new Set(['appId', 'sandbox', 'runtime', 'tools', 'lifecycle', 'restart', 'entrypoint']);
const RESTART_FIELDS = new Set(['policy', 'maxRestarts', 'backoffMs', 'maxBackoffMs']);
const TOOL_NAME = /^[a-z0-9][a-z0-9._+-]{0,63}$/;
const BASE_PATH = /^(?:\/[A-Za-z0-9._~-]+)*\/?$/;
const ENTRYPOINT = /^[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/;
const MAX_BACKOFF = 24 * 3600 * 1000;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown): string => (typeof v === 'string' ? `'${v}'` : (JSON.stringify(v) ?? String(v)));
const lastSegment = (dir: string): string => dir.replace(/\/+$/, '').split('/').pop() ?? '';

/**
 * Validates a manifest (a JSON string or an already-parsed value) read from `<appDir>/runlog.json`, fills
 * defaults, and returns it. Throws ValidationError('MANIFEST_INVALID', …) listing EVERY problem found.
 */
export function parseManifest(json: unknown, appDir: string, ctx: ManifestContext = {}): AppManifest {
  const shownDir = (ctx.sourceDir ?? appDir).replace(/\/+$/, '');
  const file = `${shownDir}/${MANIFEST_FILE}`;
  let raw: unknown = json;
  if (typeof json === 'string') {
    try {
      raw = JSON.parse(json);
    } catch (e) {
      throw new ValidationError(
        'MANIFEST_INVALID',
        `manifest ${file} is not valid JSON`,
        [`not valid JSON: ${(e as Error).message}`],
        { file },
      );
    }
  }
  if (!isRecord(raw)) {
    throw new ValidationError(
      'MANIFEST_INVALID',
      `manifest ${file} is invalid`,
      [`must be a JSON object, got ${Array.isArray(raw) ? 'an array' : show(raw)}`],
      { file },
    );
  }
  const issues: string[] = [];

  for (const key of Object.keys(raw))
    if (!KNOWN_FIELDS.has(key)) issues.push(`unknown field '${key}' (known: ${[...KNOWN_FIELDS].join(', ')})`);

  const appId = raw.appId;
  if (appId === undefined) issues.push(`appId is required (${APP_ID_GRAMMAR})`);
  else if (!isValidAppId(appId)) issues.push(`appId ${show(appId)} is not a valid app id (${APP_ID_GRAMMAR})`);
  else if (lastSegment(appDir) !== appId) {
    issues.push(
      `appId '${appId}' does not match its directory name '${lastSegment(appDir)}' (an app lives in <workspace>/apps/<appId>/)`,
    );
  }

  let sandbox: SandboxKind = DEFAULT_SANDBOX;
  if (raw.sandbox !== undefined) {
    if (SANDBOX_KINDS.includes(raw.sandbox as SandboxKind)) sandbox = raw.sandbox as SandboxKind;
    else
      issues.push(
        `sandbox ${show(raw.sandbox)} is unknown (one of: ${SANDBOX_KINDS.join(', ')}; absent means '${DEFAULT_SANDBOX}')`,
      );
  }

  let runtime: AppRuntime = DEFAULT_RUNTIME;
  if (raw.runtime !== undefined) {
    if (APP_RUNTIMES.includes(raw.runtime as AppRuntime)) runtime = raw.runtime as AppRuntime;
    else issues.push(`runtime ${show(raw.runtime)} is unknown (one of: ${APP_RUNTIMES.join(', ')})`);
  }

  const tools: string[] = [];
  if (raw.tools !== undefined) {
    if (!Array.isArray(raw.tools)) issues.push(`tools must be a list of tool names, got ${show(raw.tools)}`);
    else {
      const known = new Set(ctx.knownTools ?? TOOL_CATALOG);
      raw.tools.forEach((t, i) => {
        if (typeof t !== 'string' || !(t === TOOL_WILDCARD || TOOL_NAME.test(t)))
          issues.push(`tools[${i}] ${show(t)} is not a tool name`);
        else if (t !== TOOL_WILDCARD && !known.has(TOOL_ALIASES[t] ?? t)) {
          issues.push(
            `tools[${i}] '${t}' is not a known tool ` +
              `(known: ${[...known].join(', ')}, '${TOOL_WILDCARD}', ${Object.keys(TOOL_ALIASES).join(', ')})`,
          );
        } else if (!tools.includes(t)) tools.push(t);
      });
    }
  }

  let basePath = '';
  if (raw.lifecycle !== undefined) {
    if (!isRecord(raw.lifecycle))
      issues.push(`lifecycle must be an object like { "basePath": "/docs" }, got ${show(raw.lifecycle)}`);
    else {
      for (const key of Object.keys(raw.lifecycle))
        if (key !== 'basePath') issues.push(`lifecycle: unknown field '${key}'`);
      const bp = raw.lifecycle.basePath;
      if (bp !== undefined) {
        if (typeof bp !== 'string' || !BASE_PATH.test(bp) || bp.split('/').some((s) => s === '.' || s === '..')) {
          issues.push(
            `lifecycle.basePath ${show(bp)} must be '' or an absolute URL path like '/docs' (no '..', no query)`,
          );
        } else basePath = bp.replace(/\/$/, '');
      }
    }
  }

  const restart: RestartPolicy = { ...DEFAULT_RESTART };
  if (raw.restart !== undefined) {
    if (!isRecord(raw.restart)) issues.push(`restart must be an object, got ${show(raw.restart)}`);
    else {
      const r = raw.restart;
      for (const key of Object.keys(r)) if (!RESTART_FIELDS.has(key)) issues.push(`restart: unknown field '${key}'`);
      if (r.policy !== undefined) {
        if (RESTART_POLICIES.includes(r.policy as RestartPolicyName)) restart.policy = r.policy as RestartPolicyName;
        else issues.push(`restart.policy ${show(r.policy)} is unknown (one of: ${RESTART_POLICIES.join(', ')})`);
      }
      const int = (key: 'maxRestarts' | 'backoffMs' | 'maxBackoffMs', max: number): void => {
        const v = r[key];
        if (v === undefined) return;
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max)
          issues.push(`restart.${key} ${show(v)} must be an integer from 0 to ${max}`);
        else restart[key] = v;
      };
      int('maxRestarts', 1000);
      int('backoffMs', MAX_BACKOFF);
      int('maxBackoffMs', MAX_BACKOFF);
      if (restart.maxBackoffMs < restart.backoffMs)
        issues.push(`restart.maxBackoffMs (${restart.maxBackoffMs}) is below restart.backoffMs (${restart.backoffMs})`);
    }
  }

  let entrypoint: string | undefined;
  if (raw.entrypoint !== undefined) {
    const e = raw.entrypoint;
    if (typeof e !== 'string' || !ENTRYPOINT.test(e) || e.split('/').some((s) => s === '.' || s === '..')) {
      issues.push(`entrypoint ${show(e)} must be a path relative to the app directory (no leading '/', no '..')`);
    } else entrypoint = e;
  }

  // The entrypoint-file rule needs a valid appId and a known runtime to word the seed's message.
  if (ctx.entrypointExists === false && typeof appId === 'string' && (runtime === 'raw' || entrypoint !== undefined)) {
    const path = `${shownDir}/${entrypoint ?? DEFAULT_ENTRYPOINT}`;
    issues.push(missingEntrypointMessage(sandbox, appId, path, runtime));
  }

  if (issues.length > 0) {
    const head = `manifest ${file} is invalid`;
    throw new ValidationError('MANIFEST_INVALID', issues.length === 1 ? `${head}: ${issues[0]}` : head, issues, {
      file,
    });
  }
  return {
    appId: appId as string,
    sandbox,
    runtime,
    tools,
    lifecycle: { basePath },
    restart,
    ...(entrypoint !== undefined ? { entrypoint } : {}),
  };
}
