// Reads `<appDir>/runlog.json` and validates it with the facts only the filesystem knows (does the
// entrypoint file exist?) — the single place manifests enter runlog from disk.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationError } from '../../domain/errors.ts';
import { DEFAULT_ENTRYPOINT, MANIFEST_FILE, parseManifest, type AppManifest } from '../../domain/manifest.ts';

export interface LoadManifestOptions {
  /** Valid tool names; default: the domain's TOOL_CATALOG. */
  knownTools?: readonly string[];
}

/** Throws ValidationError MANIFEST_MISSING (no runlog.json) or MANIFEST_INVALID (every issue listed). */
export function loadManifest(appDir: string, opts: LoadManifestOptions = {}): AppManifest {
  const file = join(appDir, MANIFEST_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new ValidationError(
        'MANIFEST_MISSING',
        `no manifest at ${file}: an app directory must contain ${MANIFEST_FILE}`,
        [],
        { file },
      );
    }
    throw e;
  }
  // The entrypoint name is only known after parsing; peek at it leniently, parseManifest judges it.
  let declared: unknown;
  try {
    declared = (JSON.parse(text) as { entrypoint?: unknown }).entrypoint;
  } catch {
    declared = undefined;
  }
  const entry = typeof declared === 'string' && !declared.split('/').includes('..') ? declared : DEFAULT_ENTRYPOINT;
  return parseManifest(text, appDir, {
    knownTools: opts.knownTools,
    entrypointExists: existsSync(join(appDir, entry)),
  });
}
