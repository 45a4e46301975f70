// The V2 runtime record (`dev.mainasara.at-run.beta.v2.runtime`) and its validation, per the at-run seed's
// "Runtime record validation". Lexicon: lexicons/dev.mainasara.at-run.beta.v2.runtime.json (same fields).
//
// A runtime record is public, content-addressed configuration published by a runtime publisher:
//
//   $type            'dev.mainasara.at-run.beta.v2.runtime'
//   name             canonical runtime name for discovery and display ("python", "node-22"); never authority
//   protocolVersion  worker protocol version the runtime's adapter speaks; this runner accepts 1
//   kind             runtime kind; this runner accepts 'language'
//   platforms[]      one entry per OCI platform:
//     os, architecture, variant?   the OCI platform, matched exactly against the Docker daemon's
//     image          digest-pinned OCI artifact `repository@sha256:<64 hex>`; never started
//     exportPath     absolute directory inside that image whose contents are the runtime (copied out of a
//                    stopped container, mounted read-only at /opt/at-run/runtime)
//     launcher.path  executable relative to the runtime root (/opt/at-run/runtime)
//     launcher.args  argv after the executable, no shell syntax, exactly one literal "{entrypoint}"
//     env[]?         { name, value } additions to the sandbox environment
//   description?     free text for humans
//   createdAt        RFC 3339 datetime
//
// Validation is strict and closed: unknown fields are refused (a field this runner does not understand
// could change how code runs), and every platform entry is checked, not only the one this host selects,
// so a record gets the same verdict on every runner. All violations are collected before answering.

import { canonicalAbsolutePath, canonicalRelativePath } from './safe-path.ts';
import { digestReferenceIssues, parseDigestReference, type DigestReference } from './oci-reference.ts';
import { isDatetime } from './record-syntax.ts';
import {
  RecordValidationError,
  ViolationList,
  isPlainObject,
  join,
  unknownKeys,
  type RecordViolation,
} from './record-violations.ts';

export const RUNTIME_RECORD_NSID = 'dev.mainasara.at-run.beta.v2.runtime';
/** Worker protocol versions this runner implements. An operator policy may accept a subset. */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly number[] = Object.freeze([1]);
export const SUPPORTED_RUNTIME_KINDS: readonly string[] = Object.freeze(['language']);
export const ENTRYPOINT_PLACEHOLDER = '{entrypoint}';

export const RUNTIME_LIMITS = Object.freeze({
  nameLength: 64,
  descriptionLength: 3000,
  platforms: 32,
  args: 64,
  argBytes: 4096,
  env: 128,
  envNameLength: 256,
  envValueBytes: 32 * 1024,
});

/** An OCI platform as the Docker daemon reports it (`docker info` / `GET /version`: Os, Arch, Variant). */
export interface OciPlatform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface RuntimeLauncher {
  path: string;
  args: string[];
}

export interface RuntimeEnvVar {
  name: string;
  value: string;
}

export interface RuntimePlatform extends OciPlatform {
  image: string;
  exportPath: string;
  launcher: RuntimeLauncher;
  env?: RuntimeEnvVar[];
}

export interface RuntimeRecord {
  $type: typeof RUNTIME_RECORD_NSID;
  name: string;
  protocolVersion: number;
  kind: string;
  platforms: RuntimePlatform[];
  description?: string;
  createdAt: string;
}

export type RuntimeRecordCode =
  | 'RUNTIME_RECORD_INVALID' // not an object, wrong $type, missing/mistyped/unknown fields, bad name or createdAt
  | 'RUNTIME_PROTOCOL_UNSUPPORTED'
  | 'RUNTIME_KIND_UNSUPPORTED'
  | 'RUNTIME_PLATFORM_MISSING' // no entry matches the daemon's platform exactly
  | 'RUNTIME_PLATFORM_DUPLICATE' // two entries name the same os/architecture/variant
  | 'RUNTIME_IMAGE_NOT_DIGEST'
  | 'RUNTIME_EXPORT_PATH_INVALID'
  | 'RUNTIME_LAUNCHER_INVALID'
  | 'RUNTIME_ARGS_SHELL_SYNTAX'
  | 'RUNTIME_ARGS_ENTRYPOINT'
  | 'RUNTIME_ENV_INVALID';

/** Runtime names (also the code record's `runtime`): lower-case words joined by ".", "_" or "-". */
export const RUNTIME_NAME_RE = /^[a-z0-9]+(?:[._-][a-z0-9]+)*$/;
const PLATFORM_PART_RE = /^[a-z0-9][a-z0-9._-]{0,31}$/;
export const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
// Characters a shell would interpret (quoting, expansion, globbing, redirection, job control, comments,
// history) and whitespace. Arguments reach the launcher as argv, so none of them is ever needed.
// eslint-disable-next-line no-control-regex
const SHELL_SYNTAX_RE = /[\s\u0000-\u001f\u007f|&;<>()$`\\"'*?[\]#~!{}]/;

function platformLabel(p: OciPlatform): string {
  return `${p.os}/${p.architecture}${p.variant !== undefined ? `/${p.variant}` : ''}`;
}

export function platformMatches(entry: OciPlatform, daemon: OciPlatform): boolean {
  return (
    entry.os === daemon.os &&
    entry.architecture === daemon.architecture &&
    (entry.variant ?? undefined) === (daemon.variant || undefined)
  );
}

function checkLauncher(list: ViolationList, path: string, launcher: unknown): void {
  if (!isPlainObject(launcher)) {
    list.add('RUNTIME_LAUNCHER_INVALID', path, 'launcher must be an object { path, args }');
    return;
  }
  unknownKeys(list, 'RUNTIME_LAUNCHER_INVALID', path, launcher, ['path', 'args']);
  const exe = launcher.path;
  if (typeof exe !== 'string')
    list.add('RUNTIME_LAUNCHER_INVALID', join(path, 'path'), 'launcher.path must be a string');
  else {
    for (const p of canonicalRelativePath(exe).problems)
      list.add('RUNTIME_LAUNCHER_INVALID', join(path, 'path'), `launcher path ${JSON.stringify(exe)} ${p.message}`);
    if (SHELL_SYNTAX_RE.test(exe))
      list.add(
        'RUNTIME_LAUNCHER_INVALID',
        join(path, 'path'),
        `launcher path ${JSON.stringify(exe)} contains whitespace or shell syntax`,
      );
  }
  const args = launcher.args;
  if (!Array.isArray(args)) {
    list.add(
      'RUNTIME_ARGS_ENTRYPOINT',
      join(path, 'args'),
      `launcher.args must be an array containing exactly one ${JSON.stringify(ENTRYPOINT_PLACEHOLDER)}`,
    );
    return;
  }
  if (args.length > RUNTIME_LIMITS.args)
    list.add('RUNTIME_LAUNCHER_INVALID', join(path, 'args'), `at most ${RUNTIME_LIMITS.args} arguments`);
  let placeholders = 0;
  args.forEach((arg, i) => {
    const at = join(join(path, 'args'), i);
    if (typeof arg !== 'string') {
      list.add('RUNTIME_LAUNCHER_INVALID', at, 'arguments must be strings');
      return;
    }
    if (arg === ENTRYPOINT_PLACEHOLDER) {
      placeholders++;
      return;
    }
    if (arg.includes(ENTRYPOINT_PLACEHOLDER)) {
      list.add(
        'RUNTIME_ARGS_ENTRYPOINT',
        at,
        `${JSON.stringify(ENTRYPOINT_PLACEHOLDER)} must be a whole argument, not part of ${JSON.stringify(arg)}`,
      );
    } else if (arg === '') {
      list.add('RUNTIME_ARGS_SHELL_SYNTAX', at, 'empty argument');
    } else if (SHELL_SYNTAX_RE.test(arg)) {
      list.add('RUNTIME_ARGS_SHELL_SYNTAX', at, `argument ${JSON.stringify(arg)} contains whitespace or shell syntax`);
    }
    if (new TextEncoder().encode(arg).length > RUNTIME_LIMITS.argBytes)
      list.add('RUNTIME_LAUNCHER_INVALID', at, `argument longer than ${RUNTIME_LIMITS.argBytes} bytes`);
  });
  if (placeholders !== 1) {
    list.add(
      'RUNTIME_ARGS_ENTRYPOINT',
      join(path, 'args'),
      `exactly one argument must be the literal ${JSON.stringify(ENTRYPOINT_PLACEHOLDER)} (found ${placeholders})`,
    );
  }
}

function checkEnv(list: ViolationList, path: string, env: unknown): void {
  if (env === undefined) return;
  if (!Array.isArray(env)) {
    list.add('RUNTIME_ENV_INVALID', path, 'env must be an array of { name, value }');
    return;
  }
  if (env.length > RUNTIME_LIMITS.env) list.add('RUNTIME_ENV_INVALID', path, `at most ${RUNTIME_LIMITS.env} variables`);
  const seen = new Set<string>();
  env.forEach((item, i) => {
    const at = join(path, i);
    if (!isPlainObject(item)) {
      list.add('RUNTIME_ENV_INVALID', at, 'each variable must be an object { name, value }');
      return;
    }
    unknownKeys(list, 'RUNTIME_ENV_INVALID', at, item, ['name', 'value']);
    const { name, value } = item;
    if (typeof name !== 'string' || !ENV_NAME_RE.test(name) || name.length > RUNTIME_LIMITS.envNameLength) {
      list.add(
        'RUNTIME_ENV_INVALID',
        join(at, 'name'),
        `variable name ${JSON.stringify(name)} is not portable ([A-Za-z_][A-Za-z0-9_]*)`,
      );
    } else if (seen.has(name)) {
      list.add('RUNTIME_ENV_INVALID', join(at, 'name'), `variable ${name} is set twice`);
    } else seen.add(name);
    if (typeof value !== 'string')
      list.add('RUNTIME_ENV_INVALID', join(at, 'value'), 'variable value must be a string');
    else {
      if (value.includes('\u0000'))
        list.add('RUNTIME_ENV_INVALID', join(at, 'value'), `value of ${String(name)} contains a NUL byte`);
      if (new TextEncoder().encode(value).length > RUNTIME_LIMITS.envValueBytes)
        list.add('RUNTIME_ENV_INVALID', join(at, 'value'), `value longer than ${RUNTIME_LIMITS.envValueBytes} bytes`);
    }
  });
}

function checkPlatformEntry(list: ViolationList, path: string, entry: unknown): OciPlatform | null {
  if (!isPlainObject(entry)) {
    list.add('RUNTIME_RECORD_INVALID', path, 'platform entry must be an object');
    return null;
  }
  unknownKeys(list, 'RUNTIME_RECORD_INVALID', path, entry, [
    'os',
    'architecture',
    'variant',
    'image',
    'exportPath',
    'launcher',
    'env',
  ]);
  let platformOk = true;
  for (const key of ['os', 'architecture'] as const) {
    const v = entry[key];
    if (typeof v !== 'string' || !PLATFORM_PART_RE.test(v)) {
      list.add(
        'RUNTIME_RECORD_INVALID',
        join(path, key),
        `${key} must be a lower-case OCI platform value (got ${JSON.stringify(v)})`,
      );
      platformOk = false;
    }
  }
  if (entry.variant !== undefined && (typeof entry.variant !== 'string' || !PLATFORM_PART_RE.test(entry.variant))) {
    list.add(
      'RUNTIME_RECORD_INVALID',
      join(path, 'variant'),
      `variant must be a lower-case OCI platform value when present (got ${JSON.stringify(entry.variant)})`,
    );
    platformOk = false;
  }
  for (const issue of digestReferenceIssues(entry.image))
    list.add('RUNTIME_IMAGE_NOT_DIGEST', join(path, 'image'), issue);
  if (typeof entry.exportPath !== 'string')
    list.add('RUNTIME_EXPORT_PATH_INVALID', join(path, 'exportPath'), 'exportPath must be a string');
  else {
    for (const p of canonicalAbsolutePath(entry.exportPath).problems) {
      list.add(
        'RUNTIME_EXPORT_PATH_INVALID',
        join(path, 'exportPath'),
        `export path ${JSON.stringify(entry.exportPath)} ${p.message}`,
      );
    }
  }
  checkLauncher(list, join(path, 'launcher'), entry.launcher);
  checkEnv(list, join(path, 'env'), entry.env);
  if (!platformOk) return null;
  return {
    os: entry.os as string,
    architecture: entry.architecture as string,
    ...(entry.variant !== undefined ? { variant: entry.variant as string } : {}),
  };
}

export interface RuntimeValidationOptions {
  /** The Docker daemon's platform. When given, exactly one entry must match it and it is returned. */
  platform?: OciPlatform;
  /** Protocol versions to accept (an operator policy's list); defaults to SUPPORTED_PROTOCOL_VERSIONS. */
  acceptedProtocolVersions?: readonly number[];
}

export interface RuntimeRecordCheck {
  ok: boolean;
  violations: RecordViolation[];
  /** The record, typed, when `ok`. */
  record?: RuntimeRecord;
  /** The entry matching `options.platform`, when that was given and `ok`. */
  platform?: RuntimePlatform;
  /** Its image reference, parsed. */
  image?: DigestReference;
}

/** Checks every rule and collects every violation. Never throws. */
export function validateRuntimeRecord(value: unknown, options: RuntimeValidationOptions = {}): RuntimeRecordCheck {
  const list = new ViolationList();
  if (!isPlainObject(value)) {
    list.add('RUNTIME_RECORD_INVALID', '', 'a runtime record must be an object');
    return { ok: false, violations: list.items };
  }
  unknownKeys(list, 'RUNTIME_RECORD_INVALID', '', value, [
    '$type',
    'name',
    'protocolVersion',
    'kind',
    'platforms',
    'description',
    'createdAt',
  ]);
  if (value.$type !== RUNTIME_RECORD_NSID)
    list.add(
      'RUNTIME_RECORD_INVALID',
      '$type',
      `$type must be ${RUNTIME_RECORD_NSID} (got ${JSON.stringify(value.$type)})`,
    );
  if (
    typeof value.name !== 'string' ||
    value.name.length > RUNTIME_LIMITS.nameLength ||
    !RUNTIME_NAME_RE.test(value.name)
  ) {
    list.add(
      'RUNTIME_RECORD_INVALID',
      'name',
      `name must be 1-${RUNTIME_LIMITS.nameLength} lower-case letters/digits joined by ".", "_" or "-" (got ${JSON.stringify(value.name)})`,
    );
  }
  if (
    value.description !== undefined &&
    (typeof value.description !== 'string' || value.description.length > RUNTIME_LIMITS.descriptionLength)
  ) {
    list.add(
      'RUNTIME_RECORD_INVALID',
      'description',
      `description must be a string of at most ${RUNTIME_LIMITS.descriptionLength} characters`,
    );
  }
  if (!isDatetime(value.createdAt))
    list.add(
      'RUNTIME_RECORD_INVALID',
      'createdAt',
      `createdAt must be an RFC 3339 datetime (got ${JSON.stringify(value.createdAt)})`,
    );

  const accepted = options.acceptedProtocolVersions ?? SUPPORTED_PROTOCOL_VERSIONS;
  const pv = value.protocolVersion;
  if (!(typeof pv === 'number' && Number.isSafeInteger(pv))) {
    list.add(
      'RUNTIME_PROTOCOL_UNSUPPORTED',
      'protocolVersion',
      `protocolVersion must be an integer (got ${JSON.stringify(pv)})`,
    );
  } else if (!accepted.includes(pv) || !SUPPORTED_PROTOCOL_VERSIONS.includes(pv)) {
    list.add(
      'RUNTIME_PROTOCOL_UNSUPPORTED',
      'protocolVersion',
      `worker protocol version ${pv} is not accepted ` +
        `(accepted: ${accepted.filter((v) => SUPPORTED_PROTOCOL_VERSIONS.includes(v)).join(', ') || 'none'})`,
    );
  }
  if (typeof value.kind !== 'string' || !SUPPORTED_RUNTIME_KINDS.includes(value.kind)) {
    list.add(
      'RUNTIME_KIND_UNSUPPORTED',
      'kind',
      `runtime kind ${JSON.stringify(value.kind)} is not supported (supported: ${SUPPORTED_RUNTIME_KINDS.join(', ')})`,
    );
  }

  const platforms = value.platforms;
  const parsed: Array<OciPlatform | null> = [];
  if (!Array.isArray(platforms) || platforms.length === 0) {
    list.add('RUNTIME_RECORD_INVALID', 'platforms', 'platforms must be a non-empty array');
  } else {
    if (platforms.length > RUNTIME_LIMITS.platforms)
      list.add('RUNTIME_RECORD_INVALID', 'platforms', `at most ${RUNTIME_LIMITS.platforms} platform entries`);
    platforms.forEach((entry, i) => parsed.push(checkPlatformEntry(list, join('platforms', i), entry)));
    // Two entries for one platform are a duplicate match on that platform's runners: refuse everywhere.
    const firstIndex = new Map<string, number>();
    parsed.forEach((p, i) => {
      if (!p) return;
      const label = platformLabel(p);
      const prev = firstIndex.get(label);
      if (prev === undefined) firstIndex.set(label, i);
      else
        list.add(
          'RUNTIME_PLATFORM_DUPLICATE',
          join('platforms', i),
          `platform ${label} is also declared by platforms[${prev}]`,
        );
    });
  }

  let selectedIndex: number | undefined;
  if (options.platform && Array.isArray(platforms) && platforms.length > 0) {
    const daemon = options.platform;
    const matches = parsed.flatMap((p, i) => (p && platformMatches(p, daemon) ? [i] : []));
    if (matches.length === 0 && parsed.every((p) => p !== null)) {
      list.add(
        'RUNTIME_PLATFORM_MISSING',
        'platforms',
        `no entry for the daemon's platform ${platformLabel(daemon)} ` +
          `(record offers ${parsed.map((p) => (p ? platformLabel(p) : '?')).join(', ')}); there is no fallback`,
      );
    } else if (matches.length === 0) {
      list.add(
        'RUNTIME_PLATFORM_MISSING',
        'platforms',
        `no valid entry for the daemon's platform ${platformLabel(daemon)}`,
      );
    } else if (matches.length === 1) {
      selectedIndex = matches[0];
    }
    // More than one match is already reported as RUNTIME_PLATFORM_DUPLICATE above.
  }

  if (!list.ok) return { ok: false, violations: list.items };
  const record = value as unknown as RuntimeRecord; // why: every field was checked above (list.ok)
  if (selectedIndex === undefined) return { ok: true, violations: [], record };
  const platform = record.platforms[selectedIndex]!;
  return { ok: true, violations: [], record, platform, image: parseDigestReference(platform.image) };
}

/** Validates and returns the typed record; throws RecordValidationError listing every violation. */
export function assertRuntimeRecord(
  value: unknown,
  options: Omit<RuntimeValidationOptions, 'platform'> = {},
): RuntimeRecord {
  const check = validateRuntimeRecord(value, options);
  if (!check.ok || !check.record) throw new RecordValidationError('runtime record', check.violations);
  return check.record;
}

export interface SelectedRuntime {
  record: RuntimeRecord;
  platform: RuntimePlatform;
  image: DigestReference;
}

/** Validates the record and selects the entry for `daemon`; throws RecordValidationError otherwise. */
export function selectRuntimePlatform(
  value: unknown,
  daemon: OciPlatform,
  options: Omit<RuntimeValidationOptions, 'platform'> = {},
): SelectedRuntime {
  const check = validateRuntimeRecord(value, { ...options, platform: daemon });
  if (!check.ok || !check.record || !check.platform || !check.image)
    throw new RecordValidationError('runtime record', check.violations);
  return { record: check.record, platform: check.platform, image: check.image };
}
