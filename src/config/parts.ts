// Where the real parts are: the Debian rootfs, the images in the local registry, the registry itself.
// `npm run setup` records them under /var/lib/runlog-setup; options and env vars override. A part that
// is missing is reported when it is first needed, with the command that brings it up.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RunlogError } from '../domain/errors.ts';

export interface Parts {
  setupDir: string;
  rootfs: string;
  registry: string;
  /** Image digest references by name (app-base, at-run-sandbox, runtime-node, runtime-python, …). */
  images: Record<string, string>;
  dockerSocket: string;
}

export class SetupMissingError extends RunlogError {
  constructor(what: string) {
    super(
      'SETUP_MISSING',
      `${what} is missing: run \`npm run setup\` (scripts/setup.sh) to install and start the real parts`,
      { what },
    );
  }
}

export function discoverParts(overrides: Partial<Parts> = {}, env: NodeJS.ProcessEnv = process.env): Parts {
  const setupDir = overrides.setupDir ?? env.RUNLOG_SETUP_DIR ?? '/var/lib/runlog-setup';
  const images: Record<string, string> = {};
  for (const name of [
    'app-base',
    'at-run-sandbox',
    'runtime-node',
    'runtime-python',
    'at-run-addition-test',
    'egress-proxy',
  ]) {
    const f = join(setupDir, 'images', `${name}.ref`);
    if (existsSync(f)) images[name] = readFileSync(f, 'utf8').trim();
  }
  return {
    setupDir,
    rootfs: overrides.rootfs ?? env.RUNLOG_ROOTFS ?? join(setupDir, 'rootfs/debian-bookworm'),
    registry: overrides.registry ?? env.RUNLOG_REGISTRY_ADDR ?? '127.0.0.1:5000',
    images: { ...images, ...overrides.images },
    dockerSocket: overrides.dockerSocket ?? '/var/run/docker.sock',
  };
}

export function requireImage(parts: Parts, name: string): string {
  const ref = parts.images[name];
  if (!ref) throw new SetupMissingError(`image ${name} (${join(parts.setupDir, 'images', `${name}.ref`)})`);
  return ref;
}

export function requireRootfs(parts: Parts): string {
  if (!existsSync(join(parts.rootfs, '.runlog-complete')))
    throw new SetupMissingError(`the Debian rootfs at ${parts.rootfs}`);
  return parts.rootfs;
}
