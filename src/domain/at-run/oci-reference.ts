// OCI image references that at-run accepts: `NAME@sha256:<64 lower-case hex>` and nothing else.
//
// NAME follows the distribution/reference grammar (github.com/distribution/reference, regexp.go):
//
//   name            := [domain "/"] path-component ("/" path-component)*
//   domain          := host [":" port]
//   host            := domain-name | "[" IPv6 "]"          (domain-name also covers IPv4 literals)
//   domain-name     := domain-component ("." domain-component)*
//   domain-component:= [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
//   path-component  := [a-z0-9]+ (separator [a-z0-9]+)*     separator := [._] | "__" | "-"+
//
// As upstream, the first component is a registry host only when more components follow and it contains
// "." or ":", is "localhost", or has upper-case letters (upper case is never valid in a path component).
// NAME is at most 255 characters (upstream NameTotalLengthMax).
//
// Our policy is stricter than upstream:
//   - a digest is required, and it must be sha256 with exactly 64 lower-case hex digits (upstream also
//     accepts sha384/sha512 and registered-but-unknown algorithms);
//   - a tag together with the digest (`repo:tag@sha256:…`) is refused: upstream ignores the tag when
//     pulling, so it can only mislead a reader about what runs;
//   - no surrounding whitespace, no IPv6 zone (`%eth0`), ports 1–65535.
// Every refusal throws ValidationError `RUNTIME_IMAGE_NOT_DIGEST` listing each problem found.

import { ValidationError } from '../errors.ts';

export interface DigestReference {
  /** The full name without the digest, registry included when written (`localhost:5000/runtimes/python`). */
  repository: string;
  /** `host[:port]` when the name starts with one; absent means Docker Hub (`docker.io`) to the engine. */
  registry?: string;
  /** The name without the registry (`runtimes/python`). */
  path: string;
  /** `sha256:<64 hex>`. */
  digest: string;
  /** `repository@digest`, the canonical string to hand to the engine. */
  reference: string;
}

export const NAME_TOTAL_LENGTH_MAX = 255;
const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
const PATH_COMPONENT_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN_NAME_RE =
  /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*$/;
const IPV6_RE = /^\[[a-fA-F0-9:]+\]$/;

/** Problems with a digest string under our policy (`sha256:` + 64 lower-case hex). Empty when valid. */
export function digestIssues(digest: string): string[] {
  if (DIGEST_RE.test(digest)) return [];
  const colon = digest.indexOf(':');
  if (colon <= 0) return [`digest ${JSON.stringify(digest)} is not of the form algorithm:hex`];
  const algorithm = digest.slice(0, colon);
  const hex = digest.slice(colon + 1);
  const issues: string[] = [];
  if (algorithm !== 'sha256')
    issues.push(`digest algorithm ${JSON.stringify(algorithm)} is not accepted (only sha256)`);
  if (/[A-F]/.test(hex) && /^[0-9a-fA-F]*$/.test(hex)) issues.push('digest hex must be lower case');
  else if (!/^[0-9a-f]*$/.test(hex)) issues.push('digest is not hexadecimal');
  if (hex.length !== 64) issues.push(`digest must have 64 hex digits (has ${hex.length})`);
  return issues.length > 0 ? issues : [`digest ${JSON.stringify(digest)} is not sha256:<64 lower-case hex>`];
}

function domainIssues(domain: string): string[] {
  let host = domain;
  let port: string | undefined;
  if (domain.startsWith('[')) {
    const close = domain.indexOf(']');
    if (close === -1) return [`registry ${JSON.stringify(domain)} has an unterminated IPv6 literal`];
    host = domain.slice(0, close + 1);
    const rest = domain.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return [`registry ${JSON.stringify(domain)} is malformed after the IPv6 literal`];
      port = rest.slice(1);
    }
    if (!IPV6_RE.test(host))
      return [`registry ${JSON.stringify(domain)} is not a valid IPv6 literal (zones are not allowed)`];
  } else {
    const colon = domain.lastIndexOf(':');
    if (colon !== -1) {
      host = domain.slice(0, colon);
      port = domain.slice(colon + 1);
    }
    if (!DOMAIN_NAME_RE.test(host)) return [`registry host ${JSON.stringify(host)} is not a valid host name`];
  }
  if (port !== undefined && !(/^[0-9]{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)) {
    return [`registry port ${JSON.stringify(port)} is not a port number (1-65535)`];
  }
  return [];
}

function looksLikeDomain(first: string): boolean {
  return first.includes('.') || first.includes(':') || first === 'localhost' || first.toLowerCase() !== first;
}

interface ParsedName {
  registry?: string;
  path: string;
  issues: string[];
}

function parseName(name: string): ParsedName {
  if (name === '') return { path: '', issues: ['repository name is empty'] };
  const issues: string[] = [];
  if (name.length > NAME_TOTAL_LENGTH_MAX)
    issues.push(`repository name is longer than ${NAME_TOTAL_LENGTH_MAX} characters (${name.length})`);
  const slash = name.indexOf('/');
  let registry: string | undefined;
  let path = name;
  if (slash !== -1 && looksLikeDomain(name.slice(0, slash))) {
    registry = name.slice(0, slash);
    path = name.slice(slash + 1);
    issues.push(...domainIssues(registry));
  }
  const components = path.split('/');
  const last = components[components.length - 1] ?? '';
  if (last.includes(':')) {
    issues.push(
      `a tag (${JSON.stringify(last.slice(last.indexOf(':')))}) together with a digest is not accepted; pin by digest only`,
    );
    components[components.length - 1] = last.slice(0, last.indexOf(':'));
  }
  for (const c of components) {
    if (c === '') issues.push('repository name has an empty path component');
    else if (!PATH_COMPONENT_RE.test(c)) {
      issues.push(
        /[A-Z]/.test(c)
          ? `repository path component ${JSON.stringify(c)} contains upper-case letters`
          : `repository path component ${JSON.stringify(c)} is not [a-z0-9] separated by ".", "_", "__" or "-"`,
      );
    }
  }
  return { ...(registry !== undefined ? { registry } : {}), path, issues };
}

function notDigest(ref: string, issues: string[]): ValidationError {
  const shown = ref.length > 300 ? `${ref.slice(0, 300)}…` : ref;
  return new ValidationError(
    'RUNTIME_IMAGE_NOT_DIGEST',
    `image reference ${JSON.stringify(shown)} is not a canonical repository@sha256:<digest> reference` +
      `${issues.length === 1 ? `: ${issues[0]}` : ''}`,
    issues,
    { reference: shown },
  );
}

/** Every problem with `ref` under our policy; empty when `parseDigestReference` would accept it. */
export function digestReferenceIssues(ref: unknown): string[] {
  if (typeof ref !== 'string') return ['image reference must be a string'];
  if (ref === '') return ['image reference is empty'];
  if (ref.trim() !== ref || /\s/.test(ref)) return ['image reference contains whitespace'];
  const at = ref.indexOf('@');
  if (at === -1) return ['image reference has no @sha256:<digest> (tags and bare names are not accepted)'];
  if (ref.indexOf('@', at + 1) !== -1) return ['image reference contains more than one "@"'];
  const issues = parseName(ref.slice(0, at)).issues;
  issues.push(...digestIssues(ref.slice(at + 1)));
  return issues;
}

/** Parses `NAME@sha256:<64 hex>`; throws ValidationError `RUNTIME_IMAGE_NOT_DIGEST` listing every problem. */
export function parseDigestReference(ref: string): DigestReference {
  const issues = digestReferenceIssues(ref);
  if (issues.length > 0) throw notDigest(typeof ref === 'string' ? ref : String(ref), issues);
  const at = ref.indexOf('@');
  const repository = ref.slice(0, at);
  const digest = ref.slice(at + 1);
  const { registry, path } = parseName(repository);
  return {
    repository,
    ...(registry !== undefined ? { registry } : {}),
    path,
    digest,
    reference: `${repository}@${digest}`,
  };
}

/** Parses a bare digest (`sha256:<64 lower-case hex>`); throws `RUNTIME_IMAGE_NOT_DIGEST`. */
export function parseDigest(digest: string): string {
  const issues = typeof digest === 'string' ? digestIssues(digest) : ['digest must be a string'];
  if (issues.length > 0) throw notDigest(String(digest), issues);
  return digest;
}

export function isDigestReference(ref: unknown): ref is string {
  return digestReferenceIssues(ref).length === 0;
}

/** The registry an engine would contact: the written host, or `docker.io` when the name has none. */
export function effectiveRegistry(ref: DigestReference): string {
  return (ref.registry ?? 'docker.io').toLowerCase();
}
