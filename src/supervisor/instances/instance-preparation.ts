// An app's spawn request made into an instance spec: the app directory and its manifest validated (nothing is
// spawned on a bad manifest), the app installed into the workspace, its tools allowlist computed. Apart from the
// supervisor because it is the request's checking, done before any actor exists.
import { basename, join, resolve } from 'node:path';
import { installApp, isSameDirectory } from '../../adapters/apps/install-app.ts';
import { pathExists, readTextIfPresent } from '../../adapters/files/local-files.ts';
import { newInstanceId } from '../../adapters/ids.ts';
import { ValidationError } from '../../domain/errors.ts';
import {
  DEFAULT_ENTRYPOINT,
  isValidAppId,
  MANIFEST_FILE,
  parseManifest,
  SANDBOX_KINDS,
} from '../../domain/manifest.ts';
import { DEFAULT_RESTART, type InstanceSpec, type SandboxKind } from '../../machines/instance.machine.ts';

export interface InstanceRequest {
  appDir: string;
  sandbox: string | undefined;
  instanceId: string | undefined;
  /** The workspace's apps directory: the app is installed in <appsDir>/<appId>. */
  appsDir: string;
  /** The app's allowlist: its manifest's tools with its `cap` grants and revocations applied. */
  allowlist(appId: string, manifestTools: readonly string[]): Promise<string[]>;
}

/** Validates the app, installs it into the workspace and returns the instance's spec. */
export async function prepareInstance(r: InstanceRequest): Promise<InstanceSpec> {
  const { sandbox, instanceId } = r;
  const src = resolve(r.appDir);
  if (!pathExists(src)) throw new ValidationError('APP_DIR_MISSING', `no app directory at ${src}`);
  if (sandbox !== undefined && !SANDBOX_KINDS.includes(sandbox as SandboxKind)) {
    throw new ValidationError(
      'MANIFEST_INVALID',
      `unknown sandbox '${sandbox}': expected one of ${SANDBOX_KINDS.join(', ')} (never downgraded to weaker isolation)`,
    );
  }
  // Validated as it will live in the workspace (<workspace>/apps/<appId>), before anything is copied.
  const file = join(src, MANIFEST_FILE);
  const text = readTextIfPresent(file);
  if (text === null)
    throw new ValidationError(
      'MANIFEST_MISSING',
      `no manifest at ${file}: an app directory must contain ${MANIFEST_FILE}`,
    );
  let peek: { appId?: unknown; entrypoint?: unknown } = {};
  try {
    peek = JSON.parse(text) as typeof peek;
  } catch {
    /* parseManifest reports it */
  }
  const target = join(r.appsDir, isValidAppId(peek.appId) ? peek.appId : basename(src));
  const entry =
    typeof peek.entrypoint === 'string' && !peek.entrypoint.split('/').includes('..')
      ? peek.entrypoint
      : DEFAULT_ENTRYPOINT;
  const manifest = parseManifest(text, target, { entrypointExists: pathExists(join(src, entry)), sourceDir: src });
  if (!isSameDirectory(target, src)) installApp(src, target);
  const id = instanceId ?? newInstanceId();
  return {
    instanceId: id,
    appId: manifest.appId,
    appDir: target,
    sandbox: (sandbox as SandboxKind | undefined) ?? manifest.sandbox,
    runtime: manifest.runtime,
    tools: await r.allowlist(manifest.appId, manifest.tools),
    lifecycleBasePath: manifest.lifecycle.basePath,
    restart: { ...DEFAULT_RESTART, ...manifest.restart },
  };
}
