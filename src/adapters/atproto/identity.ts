// Identity resolution: DID → { PDS endpoint, #atproto signing key (did:key), claimed handle }.
// did:plc is read from the PLC directory (GET {plc}/{did}); did:web from https://host/.well-known/did.json.
// Nothing is cached here: every call reads the current document. (The reader may serve this step from a
// short-TTL cache: identity-cache.ts.)

import * as crypto from '@atproto/crypto';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { AtprotoError } from './errors.ts';
import { deadlineError, httpGet, parseJsonBody, readBudget, xrpcError, xrpcUrl, type HttpResult } from './http.ts';
import { assertDid, isValidDid, isValidHandle, type AtUri } from './syntax.ts';

export const DEFAULT_PLC_URL = 'https://plc.directory';
const MAX_DID_DOC_BYTES = 256 * 1024;

export interface ResolvedIdentity {
  did: string;
  /** The `#atproto_pds` service endpoint (an http(s) origin, no trailing slash). */
  pdsEndpoint: string;
  /** The `#atproto` verification method as a `did:key:z…` multibase string. */
  signingKey: string;
  /** The handle the DID document claims (first `at://` alsoKnownAs). Not verified against DNS/HTTP. */
  handle?: string;
}

export interface IdentityOptions {
  /** PLC directory for did:plc (default https://plc.directory). */
  plcUrl?: string;
  /**
   * did:web on a loopback or link-local host (localhost, 127.0.0.0/8, ::1, 169.254.0.0/16, fe80::/10, or a name
   * that resolves to one) is refused (DID_WEB_HOST_REFUSED) unless this is true: a DID document must not make
   * the supervisor probe its own machine or the cloud metadata service.
   */
  didWebAllowLoopback?: boolean;
  /** For tests: did:web on localhost / 127.0.0.1 / [::1] is fetched over http instead of https (implies didWebAllowLoopback). */
  didWebAllowHttpLoopback?: boolean;
  /** Longest one read may take (connect, headers, body), in ms. Default 10 s. */
  timeoutMs?: number;
  /** Absolute bound (epoch ms) on every read: what is left of the execution's deadline. */
  deadlineAt?: number;
}

const PLC_RE = /^did:plc:[a-z2-7]{24}$/;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Resolves a DID to its atproto identity. Throws DID_INVALID (syntax) or DID_RESOLUTION_FAILED. */
export async function resolveDid(did: string, opts: IdentityOptions = {}): Promise<ResolvedIdentity> {
  assertDid(did);
  const url = didDocumentUrl(did, opts);
  if (did.startsWith('did:web:')) await assertDidWebHostAllowed(did, new URL(url).hostname, opts);
  let res: HttpResult;
  try {
    res = await httpGet(url, {
      timeoutMs: opts.timeoutMs,
      deadlineAt: opts.deadlineAt,
      maxBytes: MAX_DID_DOC_BYTES,
      tooLarge: 'DID_RESOLUTION_FAILED',
      what: `DID document of ${did}`,
      accept: 'application/did+ld+json, application/json',
    });
  } catch (err) {
    if (err instanceof AtprotoError && (err.code === 'DID_RESOLUTION_FAILED' || err.code === 'NETWORK_TIMEOUT'))
      throw err;
    throw new AtprotoError(
      'DID_RESOLUTION_FAILED',
      `could not fetch the DID document of ${did} from ${url}: ${(err as Error).message}`,
      { did, url },
      { cause: err },
    );
  }
  if (res.status === 404 || res.status === 410) {
    throw new AtprotoError(
      'DID_RESOLUTION_FAILED',
      `${did} is ${res.status === 410 ? 'deactivated (tombstoned)' : 'not registered'} at ${url}`,
      { did, url, status: res.status },
    );
  }
  if (res.status !== 200) {
    throw new AtprotoError('DID_RESOLUTION_FAILED', `${url} answered HTTP ${res.status} for ${did}`, {
      did,
      url,
      status: res.status,
      ...xrpcError(res.body),
    });
  }
  return parseDidDocument(did, parseJsonBody(res, url, `DID document of ${did}`, 'DID_RESOLUTION_FAILED'));
}

/** Where the DID document lives. did:plc: the PLC directory; did:web: the host's /.well-known/did.json. */
export function didDocumentUrl(did: string, opts: IdentityOptions = {}): string {
  if (did.startsWith('did:plc:')) {
    if (!PLC_RE.test(did))
      throw new AtprotoError('DID_RESOLUTION_FAILED', `${did} is not a did:plc (24 base32 characters)`, { did });
    return `${(opts.plcUrl ?? DEFAULT_PLC_URL).replace(/\/+$/, '')}/${did}`;
  }
  if (did.startsWith('did:web:')) {
    const rest = did.slice('did:web:'.length);
    if (rest.includes(':'))
      throw new AtprotoError('DID_RESOLUTION_FAILED', `${did}: did:web with a path is not supported by atproto`, {
        did,
      });
    const host = decodeURIComponent(rest); // only a port may be percent-encoded ("localhost%3A2583")
    let parsed: URL;
    try {
      parsed = new URL(`https://${host}`);
    } catch {
      throw new AtprotoError('DID_RESOLUTION_FAILED', `${did}: ${JSON.stringify(host)} is not a host name`, { did });
    }
    if (parsed.host !== host.toLowerCase() || parsed.username || parsed.password) {
      throw new AtprotoError('DID_RESOLUTION_FAILED', `${did}: ${JSON.stringify(host)} is not a plain host[:port]`, {
        did,
      });
    }
    const scheme = opts.didWebAllowHttpLoopback && LOOPBACK.has(parsed.hostname) ? 'http' : 'https';
    return `${scheme}://${parsed.host}/.well-known/did.json`;
  }
  throw new AtprotoError('DID_RESOLUTION_FAILED', `unsupported DID method in ${did} (only did:plc and did:web)`, {
    did,
  });
}

/** Loopback and link-local addresses (IPv4, IPv6, IPv4-mapped IPv6). */
export function isLoopbackOrLinkLocal(address: string): boolean {
  const a = address.toLowerCase().replace(/^\[|\]$/g, '');
  const v4 = /^(?:::ffff:)?(\d{1,3})\.(\d{1,3})\.\d{1,3}\.\d{1,3}$/.exec(a);
  if (v4) return v4[1] === '127' || (v4[1] === '169' && v4[2] === '254') || v4[1] === '0';
  if (isIP(a) === 6) return a === '::1' || a === '::' || /^fe[89ab][0-9a-f]:/.test(a);
  return false;
}

/**
 * The did:web fetch policy: the host must not be loopback or link-local, by name or by what it resolves to now,
 * unless the operator allowed it. (A name that resolves differently between this check and the fetch — DNS
 * rebinding — is not caught here; see the README.)
 */
async function assertDidWebHostAllowed(did: string, hostname: string, opts: IdentityOptions): Promise<void> {
  if (opts.didWebAllowLoopback || opts.didWebAllowHttpLoopback) return;
  const host = hostname.replace(/^\[|\]$/g, '');
  const refuse = (why: string) =>
    new AtprotoError(
      'DID_WEB_HOST_REFUSED',
      `${did}: ${why}; did:web on loopback or link-local hosts is refused unless the operator allows it (atproto.didWebAllowLoopback)`,
      { did, host },
    );
  if (host === 'localhost' || host.endsWith('.localhost')) throw refuse(`${host} is a loopback name`);
  if (isIP(host) !== 0) {
    if (isLoopbackOrLinkLocal(host)) throw refuse(`${host} is a loopback or link-local address`);
    return;
  }
  let addresses: { address: string }[];
  // The name lookup counts against the read's deadline like the fetch itself (getaddrinfo has no timeout).
  const budget = readBudget(opts);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'expired'>((r) => (timer = setTimeout(() => r('expired'), budget.ms)));
  try {
    const found = await Promise.race([lookup(host, { all: true }), expired]);
    if (found === 'expired')
      throw deadlineError(`https://${host}/`, `DID document of ${did} (name lookup)`, budget.ms, budget.bound);
    addresses = found;
  } catch (err) {
    if (err instanceof AtprotoError) throw err;
    throw new AtprotoError(
      'DID_RESOLUTION_FAILED',
      `${did}: ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      { did, host },
    );
  } finally {
    clearTimeout(timer);
  }
  const bad = addresses.find((a) => isLoopbackOrLinkLocal(a.address));
  if (bad) throw refuse(`${host} resolves to ${bad.address}, a loopback or link-local address`);
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Extracts the atproto identity from a DID document. Throws DID_RESOLUTION_FAILED listing every problem. */
export function parseDidDocument(did: string, doc: unknown): ResolvedIdentity {
  const issues: string[] = [];
  if (!isObj(doc)) {
    throw new AtprotoError('DID_RESOLUTION_FAILED', `DID document of ${did} is not an object`, {
      did,
      issues: ['not an object'],
    });
  }
  if (doc.id !== did) issues.push(`id is ${JSON.stringify(doc.id)}, not ${did}`);

  const byId = (list: unknown, frag: string): Obj | undefined =>
    Array.isArray(list)
      ? list.find((x): x is Obj => isObj(x) && (x.id === `#${frag}` || x.id === `${did}#${frag}`))
      : undefined;

  let signingKey: string | undefined;
  const vm = byId(doc.verificationMethod, 'atproto');
  if (!vm) issues.push('no #atproto verification method');
  else {
    try {
      signingKey = didKeyFromVerificationMethod(vm);
    } catch (err) {
      issues.push(`#atproto verification method: ${(err as Error).message}`);
    }
  }

  let pdsEndpoint: string | undefined;
  const svc = byId(doc.service, 'atproto_pds');
  if (!svc) issues.push('no #atproto_pds service');
  else if (svc.type !== 'AtprotoPersonalDataServer')
    issues.push(`#atproto_pds has type ${JSON.stringify(svc.type)}, not AtprotoPersonalDataServer`);
  else if (typeof svc.serviceEndpoint !== 'string') issues.push('#atproto_pds serviceEndpoint is not a string');
  else {
    try {
      const u = new URL(svc.serviceEndpoint);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('not http(s)');
      if (u.username || u.password || u.search || u.hash) throw new Error('has credentials, a query or a fragment');
      pdsEndpoint = u.pathname === '/' ? u.origin : `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
    } catch (err) {
      issues.push(`#atproto_pds serviceEndpoint ${JSON.stringify(svc.serviceEndpoint)}: ${(err as Error).message}`);
    }
  }

  let handle: string | undefined;
  if (Array.isArray(doc.alsoKnownAs)) {
    const aka = doc.alsoKnownAs.find((a): a is string => typeof a === 'string' && a.startsWith('at://'));
    const h = aka?.slice(5).toLowerCase();
    if (h && isValidHandle(h)) handle = h;
  }

  if (issues.length > 0 || !signingKey || !pdsEndpoint) {
    throw new AtprotoError('DID_RESOLUTION_FAILED', `DID document of ${did} is not usable: ${issues.join('; ')}`, {
      did,
      issues,
    });
  }
  return { did, pdsEndpoint, signingKey, ...(handle ? { handle } : {}) };
}

function didKeyFromVerificationMethod(vm: Obj): string {
  const mb = vm.publicKeyMultibase;
  if (typeof mb !== 'string') throw new Error('no publicKeyMultibase');
  let didKey: string;
  if (vm.type === 'Multikey') {
    const parsed = crypto.parseMultikey(mb);
    didKey = crypto.formatDidKey(parsed.jwtAlg, parsed.keyBytes);
  } else if (vm.type === 'EcdsaSecp256k1VerificationKey2019') {
    didKey = crypto.formatDidKey(crypto.SECP256K1_JWT_ALG, crypto.multibaseToBytes(mb));
  } else if (vm.type === 'EcdsaSecp256r1VerificationKey2019') {
    didKey = crypto.formatDidKey(crypto.P256_JWT_ALG, crypto.multibaseToBytes(mb));
  } else {
    throw new Error(`unsupported key type ${JSON.stringify(vm.type)}`);
  }
  crypto.parseDidKey(didKey); // throws on an unsupported curve or a malformed key
  return didKey;
}

export interface HandleOptions extends IdentityOptions {
  /** An XRPC service that answers com.atproto.identity.resolveHandle (e.g. the author's PDS). */
  handleResolverUrl: string;
}

/**
 * Resolves a handle through `com.atproto.identity.resolveHandle`, then resolves the DID and requires its
 * document to claim the handle back (bidirectional check). Throws HANDLE_RESOLUTION_FAILED.
 */
export async function resolveHandle(handle: string, opts: HandleOptions): Promise<ResolvedIdentity> {
  const h = handle.toLowerCase();
  if (!isValidHandle(h))
    throw new AtprotoError('HANDLE_RESOLUTION_FAILED', `invalid handle ${JSON.stringify(handle)}`, { handle });
  const url = xrpcUrl(opts.handleResolverUrl, 'com.atproto.identity.resolveHandle', { handle: h });
  const res = await httpGet(url, {
    timeoutMs: opts.timeoutMs,
    deadlineAt: opts.deadlineAt,
    maxBytes: 64 * 1024,
    tooLarge: 'HANDLE_RESOLUTION_FAILED',
    what: `handle ${h}`,
  });
  if (res.status !== 200) {
    throw new AtprotoError('HANDLE_RESOLUTION_FAILED', `handle ${h} did not resolve (HTTP ${res.status})`, {
      handle: h,
      status: res.status,
      ...xrpcError(res.body),
    });
  }
  const body = parseJsonBody(res, url, `handle ${h}`, 'HANDLE_RESOLUTION_FAILED');
  const did = isObj(body) ? body.did : undefined;
  if (typeof did !== 'string' || !isValidDid(did)) {
    throw new AtprotoError('HANDLE_RESOLUTION_FAILED', `handle ${h} resolved to ${JSON.stringify(did)}, not a DID`, {
      handle: h,
    });
  }
  const identity = await resolveDid(did, opts);
  if (identity.handle !== h) {
    throw new AtprotoError(
      'HANDLE_RESOLUTION_FAILED',
      `handle ${h} points at ${did}, whose DID document claims ${identity.handle ?? 'no handle'}`,
      { handle: h, did },
    );
  }
  return identity;
}

/** Resolves the authority of a parsed AT URI (a DID, or a handle when `handleResolverUrl` is given). */
export async function resolveAuthority(
  uri: AtUri,
  opts: IdentityOptions & { handleResolverUrl?: string },
): Promise<ResolvedIdentity> {
  if (uri.did) return resolveDid(uri.did, opts);
  if (!opts.handleResolverUrl) {
    throw new AtprotoError(
      'HANDLE_RESOLUTION_FAILED',
      `${uri.uri} names a handle; pass handleResolverUrl or use the DID`,
      { uri: uri.uri },
    );
  }
  return resolveHandle(uri.authority, { ...opts, handleResolverUrl: opts.handleResolverUrl });
}
