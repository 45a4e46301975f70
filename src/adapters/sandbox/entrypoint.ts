// What a sandbox runs: the app's own entrypoint script, or — for runtime 'astro' apps that ship none — the
// seed's synthesized one (inline via `bash -c`, so nothing is written into the app directory).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { entrypointFile, missingEntrypointMessage, type AppManifest, type SandboxKind } from '../../domain/manifest.ts';
import { SandboxError } from './errors.ts';

export const SYNTHESIZED_ENTRYPOINT = `set -e
export PORT="\${APP_PORT:-4001}"
if [ ! -d node_modules ] && [ ! -d /workspace/node_modules ]; then
  npm install --prefer-offline 2>&1 || npm install
fi
ASTRO="node_modules/.bin/astro"
[ -x "$ASTRO" ] || ASTRO="/workspace/node_modules/.bin/astro"
exec "$ASTRO" dev --host 0.0.0.0 --port "$PORT"
`;

/**
 * The argv to run inside the sandbox (cwd = the app directory, mounted at `sandboxAppDir`).
 * Throws ENTRYPOINT_MISSING with the seed's text when a raw app (or a declared entrypoint) has no file.
 */
export function resolveEntrypoint(
  hostAppDir: string,
  sandboxAppDir: string,
  manifest: AppManifest,
  sandbox: SandboxKind,
): string[] {
  const file = entrypointFile(manifest);
  if (existsSync(join(hostAppDir, file))) return ['/bin/bash', `${sandboxAppDir}/${file}`];
  if (manifest.runtime === 'raw' || manifest.entrypoint !== undefined) {
    const path = join(hostAppDir, file);
    throw new SandboxError(
      'ENTRYPOINT_MISSING',
      missingEntrypointMessage(sandbox, manifest.appId, path, manifest.runtime),
      { appId: manifest.appId, path },
    );
  }
  return ['/bin/bash', '-c', SYNTHESIZED_ENTRYPOINT];
}
