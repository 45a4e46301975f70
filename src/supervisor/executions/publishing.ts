// Publishing for authors and runtime publishers: runtime records filled from a template and the image
// digest, and code records from a directory (packed as one top-level directory, uploaded with the MIME
// type `application/<runtime-record-cid>`), so nobody hand-crafts records.
import { join, resolve } from 'node:path';
import { assertValidArchive, DEFAULT_ARCHIVE_LIMITS, packCodeDirectory } from '../../adapters/archive/index.ts';
import {
  AT_RUN_V2,
  createAtprotoReader,
  type AtprotoReaderOptions,
  type Publisher,
} from '../../adapters/atproto/index.ts';
import { readTextIfPresent } from '../../adapters/files/local-files.ts';
import { CODE_RECORD_NSID, validateCodeRecord, type RequestedLimits } from '../../domain/at-run/code-record.ts';
import { RecordValidationError } from '../../domain/at-run/record-violations.ts';
import { RUNTIME_RECORD_NSID, validateRuntimeRecord } from '../../domain/at-run/runtime-record.ts';
import { ValidationError } from '../../domain/errors.ts';

export interface Published {
  uri: string;
  cid: string;
}

/** `<dir>/runtime-record.json` is a template; every platform's image becomes `image`, createdAt now. */
export async function publishRuntime(
  publisher: Publisher,
  opts: { dir: string; image: string; rkey?: string },
): Promise<Published & { record: Record<string, unknown> }> {
  const file = join(resolve(opts.dir), 'runtime-record.json');
  const text = readTextIfPresent(file);
  if (text === null) throw new ValidationError('RUNTIME_TEMPLATE_MISSING', `no runtime-record.json in ${opts.dir}`);
  const template = JSON.parse(text) as Record<string, unknown>;
  const record = {
    ...template,
    $type: RUNTIME_RECORD_NSID,
    platforms: ((template.platforms as Record<string, unknown>[]) ?? []).map((p) => ({ ...p, image: opts.image })),
    createdAt: new Date().toISOString(),
  };
  const check = validateRuntimeRecord(record);
  if (!check.ok) throw new RecordValidationError('runtime record', check.violations);
  const ref = await publisher.putRecord(AT_RUN_V2.runtime, opts.rkey, record as never);
  return { ...ref, record };
}

/** The optional `at-run.json` in a code directory: what the record says besides the code itself. */
interface CodeManifest {
  entrypoint?: string;
  requested?: RequestedLimits;
  description?: string;
  additions?: string[];
  /** The handlers the entrypoint exports: recorded so runners refuse any other one before running anything. */
  handlers?: string[];
}

export async function publishCode(
  publisher: Publisher,
  opts: {
    dir: string;
    runtime: string;
    entrypoint?: string;
    atproto?: AtprotoReaderOptions;
    rkey?: string;
    requested?: RequestedLimits;
  },
): Promise<Published & { blobCid: string; runtimeCid: string }> {
  const dir = resolve(opts.dir);
  const manifestFile = join(dir, 'at-run.json');
  const manifestText = readTextIfPresent(manifestFile);
  const manifest: CodeManifest = manifestText === null ? {} : (JSON.parse(manifestText) as CodeManifest);
  const entrypoint = opts.entrypoint ?? manifest.entrypoint;
  if (!entrypoint)
    throw new ValidationError(
      'ENTRYPOINT_MISSING',
      `no entrypoint: pass --entrypoint or put {"entrypoint": …} in ${manifestFile}`,
    );
  // The runtime is bound by its CID as the runner will see it: fetched (and verified) like any record.
  const reader = createAtprotoReader({ mode: 'strict', ...opts.atproto });
  const runtime = await reader.fetchRecord(opts.runtime);
  const runtimeName = String((runtime.value as { name?: unknown }).name ?? '');
  const { archive } = await packCodeDirectory(dir);
  await assertValidArchive(archive, DEFAULT_ARCHIVE_LIMITS, { kind: 'code', entrypoint });
  const blob = await publisher.uploadBlob(archive, `application/${runtime.cid}`);
  const record = {
    $type: CODE_RECORD_NSID,
    runtime: runtimeName,
    runtimeRecord: { uri: runtime.uri, cid: runtime.cid },
    blob,
    entrypoint,
    ...(manifest.additions ? { additions: manifest.additions } : {}),
    ...((opts.requested ?? manifest.requested) ? { requested: opts.requested ?? manifest.requested } : {}),
    ...(manifest.handlers ? { handlers: manifest.handlers } : {}),
    ...(manifest.description ? { description: manifest.description } : {}),
    createdAt: new Date().toISOString(),
  };
  const check = validateCodeRecord(record);
  if (!check.ok) throw new RecordValidationError('code record', check.violations);
  const ref = await publisher.putRecord(AT_RUN_V2.code, opts.rkey, record as never);
  return { ...ref, blobCid: blob.ref.$link, runtimeCid: runtime.cid };
}
