// The Docker side a container runner needs before its first spawn: Docker answering, the app-base image present
// (pinned by digest), the bridge network.
//
// Checked once per runner (ContainerRunner.ensureReady) and kept apart from spawning: each failure says which
// part of the setup is missing (SETUP_MISSING points at `npm run setup`), and a network another runner created
// meanwhile is taken as it is.
import { ValidationError } from '../../domain/errors.ts';
import { runnerLabel } from '../../domain/manifest.ts';
import type { DockerEngine } from '../docker/docker-port.ts';
import { DockerConflictError } from '../docker/errors.ts';
import { SandboxError } from './errors.ts';

const LABEL = runnerLabel('container');

/** Docker answers on `socketPath`, the image is present (pulled by digest when not), the network exists. */
export async function ensureDockerReady(
  engine: DockerEngine,
  socketPath: string,
  image: string,
  network: string,
  extraLabels: Record<string, string>,
): Promise<void> {
  try {
    await engine.ping();
  } catch (e) {
    throw new SandboxError(
      'SETUP_MISSING',
      `${LABEL} Docker does not answer on ${socketPath}: run 'npm run setup'`,
      {},
      { cause: e },
    );
  }
  await ensureImage(engine, image);
  await ensureNetwork(engine, network, extraLabels);
}

/** The image, pinned by digest, present on the daemon: pulled only when it is not. */
async function ensureImage(engine: DockerEngine, ref: string): Promise<void> {
  if (!/@sha256:[0-9a-f]{64}$/.test(ref))
    throw new ValidationError('IMAGE_REF_INVALID', `${LABEL} image '${ref}' must be pinned by digest (name@sha256:…)`);
  if (await engine.inspectImage(ref)) return; // present: pulling by digest would still contact the registry
  try {
    await engine.pullByDigest(ref);
  } catch (e) {
    throw new SandboxError(
      'SETUP_MISSING',
      `${LABEL} image ${ref} is not available (${(e as Error).message}): run 'npm run setup'`,
      { image: ref },
      { cause: e },
    );
  }
}

/** The bridge network, created when missing (another runner may create it meanwhile). */
async function ensureNetwork(engine: DockerEngine, name: string, extraLabels: Record<string, string>): Promise<void> {
  const info = await engine.inspectNetwork(name);
  if (info) {
    if (info.driver !== 'bridge')
      throw new SandboxError(
        'SPAWN_FAILED',
        `${LABEL} network ${name} exists but is not a bridge network (driver ${info.driver})`,
      );
    return;
  }
  try {
    await engine.createNetwork(name, { 'runlog.kind': 'network', ...extraLabels });
  } catch (e) {
    if (!(e instanceof DockerConflictError)) throw e; // created meanwhile by another runner
  }
}
