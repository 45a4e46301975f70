// What the operator's policy says about a code record and its runtime: the limits an execution gets, and the
// publisher, registry and platform checks.
//
// The policy is parsed once (operator-policy.ts); these checks run for every execution, so each one lists every
// refusal at once (admitCode, admitRuntime) with the codes a caller can act on, and the limits are computed
// here, where the clamp and reject modes and the network grant (egress-grant.ts: the policy's destinations met with
// the hosts the record names, or no network at all) are applied.
import { ValidationError } from '../errors.ts';
import { grantNetwork } from './egress-grant.ts';
import { parseDigestReference, effectiveRegistry, type DigestReference } from './oci-reference.ts';
import { isDid } from './record-syntax.ts';
import type { OciPlatform, RuntimePlatform, RuntimeRecord } from './runtime-record.ts';
import { runtimePublisherOf, type CodeRecord, type RequestedLimits } from './code-record.ts';
import { RecordValidationError, type RecordViolation } from './record-violations.ts';
import {
  positiveNumber,
  WILDCARD,
  type EffectiveLimits,
  type OperatorPolicy,
  type PrestartPolicy,
} from './operator-policy.ts';

const REQUESTABLE = [
  ['memoryMb', true],
  ['cpus', false],
  ['pids', true],
  ['timeoutMs', true],
] as const;

/**
 * What network an execution gets: false unless it asks, else the grant. Throws `NETWORK_NOT_ALLOWED` when the
 * policy lists no destinations, `NETWORK_GRANT_EMPTY` when the hosts it names meet none of them, and
 * `LIMIT_INVALID` for a malformed request.
 */
function networkGrant(policy: OperatorPolicy, requested: RequestedLimits): EffectiveLimits['network'] {
  if (requested.network !== undefined && typeof requested.network !== 'boolean')
    throw new ValidationError('LIMIT_INVALID', 'requested.network must be a boolean', ['network is not a boolean']);
  if (requested.hosts !== undefined && requested.network !== true)
    throw new ValidationError('LIMIT_INVALID', 'requested.hosts needs network: true', ['hosts without network']);
  if (requested.network !== true) return false;
  const outcome = grantNetwork(policy.network, requested.hosts);
  if (!outcome.ok) throw new ValidationError(outcome.code, outcome.message, outcome.issues);
  return outcome.grant;
}

/**
 * The limits an execution runs with. Each requestable limit is the request, or the policy default when
 * absent; a value above its ceiling is lowered to the ceiling and named in `clamped` (clamp mode), or the
 * whole request is refused with `LIMIT_EXCEEDS_POLICY` listing every excess (reject mode). A request for
 * network gets its grant (networkGrant: NETWORK_NOT_ALLOWED or NETWORK_GRANT_EMPTY when there is none) in both
 * modes. A malformed request throws `LIMIT_INVALID`.
 */
export function effectiveLimits(
  policy: OperatorPolicy,
  requested: RequestedLimits = {},
): { limits: EffectiveLimits; clamped: string[] } {
  const network = networkGrant(policy, requested);
  const invalid: string[] = [];
  const excess: string[] = [];
  const clamped: string[] = [];
  const limits: EffectiveLimits = { ...policy.ceilings, network };
  for (const [key, integer] of REQUESTABLE) {
    const asked = requested[key];
    if (asked !== undefined && !positiveNumber(asked, integer)) {
      invalid.push(`${key} must be a positive ${integer ? 'integer' : 'number'} (got ${JSON.stringify(asked)})`);
      continue;
    }
    const want = asked ?? policy.defaults[key];
    const ceiling = policy.ceilings[key];
    if (want > ceiling) {
      if (policy.limitMode === 'reject') excess.push(`${key} ${want} exceeds the policy ceiling ${ceiling}`);
      else clamped.push(key);
      limits[key] = ceiling;
    } else limits[key] = want;
  }
  if (invalid.length > 0) throw new ValidationError('LIMIT_INVALID', 'invalid resource request', invalid);
  if (excess.length > 0)
    throw new ValidationError(
      'LIMIT_EXCEEDS_POLICY',
      `requested limits exceed this runner's policy${excess.length === 1 ? `: ${excess[0]}` : ''}`,
      excess,
      { mode: 'reject' },
    );
  return { limits, clamped };
}

/** Throws `PUBLISHER_NOT_ALLOWED` unless `did` may publish runtimes under `policy`. */
export function checkPublisher(policy: OperatorPolicy, did: string): void {
  if (!isDid(did))
    throw new ValidationError('PUBLISHER_NOT_ALLOWED', `runtime publisher ${JSON.stringify(did)} is not a DID`, [
      'not a DID',
    ]);
  if (policy.publishers.includes(WILDCARD) || policy.publishers.includes(did)) return;
  throw new ValidationError(
    'PUBLISHER_NOT_ALLOWED',
    `runtime publisher ${did} is not in this runner's publisher list` +
      `${policy.publishers.length === 0 ? ' (the list is empty: no publisher is allowed)' : ''}`,
    [`${did} is not allowed`],
    { did },
  );
}

/**
 * Whether a runtime by this publisher may be started before a request arrives (prestart.publishers). A sandbox
 * waiting for its envelope already runs the runtime's launcher: only a publisher the operator trusts gets that.
 */
export function mayPrestart(policy: Pick<PrestartPolicy, 'publishers'>, publisherDid: string): boolean {
  return policy.publishers.includes(WILDCARD) || policy.publishers.includes(publisherDid);
}

/**
 * Parses `ref` (must be a canonical digest reference: `RUNTIME_IMAGE_NOT_DIGEST` otherwise) and throws
 * `REGISTRY_NOT_ALLOWED` unless its registry is allowed. A name without a registry host is `docker.io`.
 * Hosts compare case-insensitively; ports must match exactly.
 */
export function checkRegistry(policy: OperatorPolicy, ref: string | DigestReference): DigestReference {
  const parsed = typeof ref === 'string' ? parseDigestReference(ref) : ref;
  const registry = effectiveRegistry(parsed);
  if (policy.registries.includes(WILDCARD) || policy.registries.some((r) => r.toLowerCase() === registry))
    return parsed;
  throw new ValidationError(
    'REGISTRY_NOT_ALLOWED',
    `image ${parsed.reference} comes from registry ${registry}, which this runner does not allow` +
      `${policy.registries.length === 0 ? ' (the list is empty: no registry is allowed)' : ''}`,
    [`${registry} is not allowed`],
    { registry, reference: parsed.reference },
  );
}

/** Throws `PLATFORM_NOT_ACCEPTED` unless the daemon's platform is one this runner serves. */
export function checkPlatform(policy: OperatorPolicy, daemon: OciPlatform): void {
  const ok = policy.platforms.some(
    (p) =>
      p.os === daemon.os &&
      p.architecture === daemon.architecture &&
      (p.variant === undefined || p.variant === daemon.variant),
  );
  if (ok) return;
  const label = `${daemon.os}/${daemon.architecture}${daemon.variant ? `/${daemon.variant}` : ''}`;
  throw new ValidationError(
    'PLATFORM_NOT_ACCEPTED',
    `this runner's policy does not accept platform ${label}`,
    [`${label} is not accepted`],
    { platform: daemon },
  );
}

function collect(violations: RecordViolation[], path: string, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    const issues = err.issues.length > 0 ? err.issues : [err.message];
    for (const message of issues) violations.push({ code: err.code, path, message });
  }
}

/**
 * Everything this runner's policy says about a (validated) code record, checked at once: the runtime's
 * publisher, each addition's registry, the blob size against the archive limit, and the requested limits.
 * Returns the effective limits; throws RecordValidationError listing every refusal (PUBLISHER_NOT_ALLOWED,
 * REGISTRY_NOT_ALLOWED, RUNTIME_IMAGE_NOT_DIGEST, BLOB_TOO_LARGE, NETWORK_NOT_ALLOWED, NETWORK_GRANT_EMPTY,
 * LIMIT_EXCEEDS_POLICY, LIMIT_INVALID).
 */
export function admitCode(policy: OperatorPolicy, code: CodeRecord): { limits: EffectiveLimits; clamped: string[] } {
  const violations: RecordViolation[] = [];
  collect(violations, 'runtimeRecord.uri', () => checkPublisher(policy, runtimePublisherOf(code)));
  (code.additions ?? []).forEach((ref, i) => collect(violations, `additions[${i}]`, () => checkRegistry(policy, ref)));
  if (code.blob.size > policy.archive.maxArchiveBytes) {
    violations.push({
      code: 'BLOB_TOO_LARGE',
      path: 'blob.size',
      message: `the code blob is ${code.blob.size} bytes; this runner accepts at most ${policy.archive.maxArchiveBytes}`,
    });
  }
  let result: { limits: EffectiveLimits; clamped: string[] } | undefined;
  collect(violations, 'requested', () => {
    result = effectiveLimits(policy, code.requested ?? {});
  });
  if (violations.length > 0 || !result)
    throw new RecordValidationError('code record under this runner policy', violations);
  return result;
}

/**
 * Everything this runner's policy says about the selected runtime: the daemon platform is one it serves, the
 * record's protocol version is accepted, and the image comes from an allowed registry. The publisher is
 * checked by admitCode (it is named by the code record's runtimeRecord.uri). Throws RecordValidationError.
 */
export function admitRuntime(
  policy: OperatorPolicy,
  selected: { record: Pick<RuntimeRecord, 'protocolVersion'>; platform: RuntimePlatform },
): DigestReference {
  const violations: RecordViolation[] = [];
  collect(violations, 'platforms', () => checkPlatform(policy, selected.platform));
  if (!policy.protocolVersions.includes(selected.record.protocolVersion)) {
    violations.push({
      code: 'RUNTIME_PROTOCOL_UNSUPPORTED',
      path: 'protocolVersion',
      message: `this runner accepts protocol versions ${policy.protocolVersions.join(', ')}`,
    });
  }
  let image: DigestReference | undefined;
  collect(violations, 'image', () => {
    image = checkRegistry(policy, selected.platform.image);
  });
  if (violations.length > 0 || !image) throw new RecordValidationError('runtime under this runner policy', violations);
  return image;
}
