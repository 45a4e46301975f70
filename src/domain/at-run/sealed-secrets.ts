// Sealed secrets (dev.mainasara.at-run.beta.v2.secrets): values sealed to one runner's X25519 key, for executions
// of one code record, in a record that is otherwise public.
//
// Each entry is one sealed box (x25519-seal.ts: a fresh ephemeral X25519 key pair, HKDF-SHA256 with info =
// HKDF_INFO, XChaCha20-Poly1305 under a random 24-byte nonce). The associated data binds the algorithm, the record's
// own URI (its author and rkey), the runner's DID, the recipient key, the code URI (or empty) and the entry's name, so
// an entry copied to another name, record, author, code or runner fails authentication. Every primitive is @noble's
// audited code. It is domain code because it is pure: no IO, and the caller passes the key lookup and "now".
// Values never appear in an error message or detail: refusals name the entry, the key or the record.

import { base64 } from 'multiformats/bases/base64';
import { isDatetime, isDid, parseRecordUriOf } from './record-syntax.ts';
import {
  SecretsCodeMismatchError,
  SecretsInputInvalidError,
  SecretsRecordInvalidError,
  SecretsRunnerMismatchError,
  SecretsTamperedError,
} from './secrets-errors.ts';
import { decodeX25519DidKey, isX25519DidKey, type X25519PrivateKey } from './x25519-keys.ts';
import { SEAL_NONCE_BYTES, SEAL_TAG_BYTES, lengthPrefixed, openBox, sealBox } from './x25519-seal.ts';

export const SECRETS_NSID = 'dev.mainasara.at-run.beta.v2.secrets';
export const SECRETS_ALGORITHM = 'x25519-xchacha20poly1305';
/** The lexicon's entries maxLength. */
export const MAX_SECRET_ENTRIES = 64;
export const MAX_SECRET_NAME_LENGTH = 128;
/** The lexicon's ciphertext maxLength, less the 16-byte Poly1305 tag. */
export const MAX_SECRET_VALUE_BYTES = 65536 - 16;
/** All values together: the record must stay well under what a runner fetches (2 MiB of JSON). */
export const MAX_SECRETS_TOTAL_BYTES = 1024 * 1024;
/** Portable process-environment names, so a value can be handed over under its name anywhere. */
export const SECRET_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

const NONCE_BYTES = SEAL_NONCE_BYTES;
const TAG_BYTES = SEAL_TAG_BYTES;
const CODE_COLLECTIONS = ['dev.mainasara.at-run.beta.v2.code', 'dev.mainasara.at-run.beta.v2.alias'];
const encoder = new TextEncoder();
const HKDF_INFO = encoder.encode('dev.mainasara.at-run.beta.v2.secrets/v1 hkdf-sha256 x25519-xchacha20poly1305');
const AAD_LABEL = 'dev.mainasara.at-run.beta.v2.secrets/v1 aad';

/** Bytes as atproto JSON carries them. */
export interface JsonBytes {
  $bytes: string;
}

export interface SealedEntry {
  name: string;
  ephemeralKey: JsonBytes;
  nonce: JsonBytes;
  ciphertext: JsonBytes;
}

/** A secrets record in atproto JSON, ready for putRecord. */
export interface SecretsRecord {
  $type: typeof SECRETS_NSID;
  runner: string;
  recipientKey: string;
  algorithm: typeof SECRETS_ALGORITHM;
  code?: string;
  entries: SealedEntry[];
  createdAt: string;
}

export interface SealInput {
  /** at://<author DID>/dev.mainasara.at-run.beta.v2.secrets/<rkey>: where the record will be written. */
  recordUri: string;
  /** The runner's DID. */
  runner: string;
  /** The runner's current encryption key (did:key), from its runner record. */
  recipientKey: string;
  /** Restricts the values to executions of this code (or alias) record. */
  code?: string;
  entries: readonly { name: string; value: string }[];
  createdAt?: string;
}

export interface OpenContext {
  /** The secrets record's URI, as the job names it. */
  recordUri: string;
  /** This runner's DID. */
  runnerDid: string;
  /** The code record the execution runs, and the alias it was named by, if any. */
  codeUri: string;
  aliasUri?: string;
  /** This runner's private key for a public key, or a typed refusal (unknown, retired at `now`). */
  keyFor: (recipientKey: string, now: Date) => X25519PrivateKey;
  now: Date;
}

const toJsonBytes = (b: Uint8Array): JsonBytes => ({ $bytes: base64.baseEncode(b) });

function fromBytes(v: unknown): Uint8Array | null {
  if (v instanceof Uint8Array) return v;
  if (typeof v !== 'object' || v === null || Object.keys(v).length !== 1) return null;
  const s = (v as Record<string, unknown>).$bytes;
  if (typeof s !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
  try {
    return base64.baseDecode(s.replace(/=+$/, ''));
  } catch {
    return null;
  }
}

function entryAad(r: { recordUri: string; runner: string; recipientKey: string; code?: string }, name: string) {
  return lengthPrefixed([AAD_LABEL, SECRETS_ALGORITHM, r.recordUri, r.runner, r.recipientKey, r.code ?? '', name]);
}

function nameIssues(name: unknown, at: string, seen: Set<string>): string[] {
  if (typeof name !== 'string') return [`${at}.name: must be a string`];
  const shown = JSON.stringify(name.slice(0, 64));
  if (name.length > MAX_SECRET_NAME_LENGTH) return [`${at}.name: ${shown}… is longer than ${MAX_SECRET_NAME_LENGTH}`];
  if (!SECRET_NAME_RE.test(name))
    return [`${at}.name: ${shown} is not an environment-style name [A-Za-z_][A-Za-z0-9_]*`];
  if (seen.has(name)) return [`${at}.name: ${shown} appears more than once`];
  seen.add(name);
  return [];
}

function recordUriIssues(uri: string): string[] {
  return parseRecordUriOf(uri, SECRETS_NSID) ? [] : [`recordUri: must be at://<did>/${SECRETS_NSID}/<rkey>`];
}

function codeIssues(code: unknown): string[] {
  if (code === undefined) return [];
  return CODE_COLLECTIONS.some((c) => parseRecordUriOf(code, c))
    ? []
    : ['code: must be the at:// URI of a code or alias record, named by DID'];
}

function sealIssues(input: SealInput): string[] {
  const issues = [...recordUriIssues(input.recordUri), ...codeIssues(input.code)];
  if (!isDid(input.runner)) issues.push('runner: must be a DID');
  if (!Array.isArray(input.entries) || input.entries.length === 0) issues.push('entries: name at least one secret');
  else if (input.entries.length > MAX_SECRET_ENTRIES)
    issues.push(`entries: at most ${MAX_SECRET_ENTRIES}, not ${input.entries.length}`);
  const seen = new Set<string>();
  let total = 0;
  for (const [i, e] of (input.entries ?? []).entries()) {
    issues.push(...nameIssues(e?.name, `entries[${i}]`, seen));
    if (typeof e?.value !== 'string') issues.push(`entries[${i}].value: must be a string`);
    else {
      const bytes = encoder.encode(e.value).length;
      total += bytes;
      if (bytes > MAX_SECRET_VALUE_BYTES)
        issues.push(`entries[${i}].value: ${bytes} bytes, more than ${MAX_SECRET_VALUE_BYTES}`);
    }
  }
  if (total > MAX_SECRETS_TOTAL_BYTES)
    issues.push(`entries: ${total} bytes of values, more than ${MAX_SECRETS_TOTAL_BYTES}`);
  return issues;
}

/** Seals each value to the runner's key; returns the record to write at `recordUri`. Throws SECRETS_INPUT_INVALID. */
export function sealEntries(input: SealInput): SecretsRecord {
  const issues = sealIssues(input);
  if (issues.length > 0) throw new SecretsInputInvalidError(issues);
  const recipientPub = decodeX25519DidKey(input.recipientKey);
  const entries = input.entries.map(({ name, value }): SealedEntry => {
    const plaintext = encoder.encode(value);
    const box = sealBox(recipientPub, plaintext, { info: HKDF_INFO, aad: entryAad(input, name) });
    plaintext.fill(0);
    return {
      name,
      ephemeralKey: toJsonBytes(box.ephemeralKey),
      nonce: toJsonBytes(box.nonce),
      ciphertext: toJsonBytes(box.ciphertext),
    };
  });
  return {
    $type: SECRETS_NSID,
    runner: input.runner,
    recipientKey: input.recipientKey,
    algorithm: SECRETS_ALGORITHM,
    ...(input.code !== undefined ? { code: input.code } : {}),
    entries,
    createdAt: input.createdAt ?? new Date().toISOString(),
  };
}

interface ParsedEntry {
  name: string;
  ephemeralKey: Uint8Array;
  nonce: Uint8Array;
  ciphertext: Uint8Array;
}

interface ParsedRecord {
  runner: string;
  recipientKey: string;
  code?: string;
  entries: ParsedEntry[];
}

function parseEntry(e: unknown, at: string, seen: Set<string>, issues: string[]): ParsedEntry | null {
  if (typeof e !== 'object' || e === null) {
    issues.push(`${at}: must be an object`);
    return null;
  }
  const r = e as Record<string, unknown>;
  const before = issues.length;
  issues.push(...nameIssues(r.name, at, seen));
  const ephemeralKey = fromBytes(r.ephemeralKey);
  const nonce = fromBytes(r.nonce);
  const ciphertext = fromBytes(r.ciphertext);
  if (ephemeralKey?.length !== 32) issues.push(`${at}.ephemeralKey: must be 32 bytes`);
  if (nonce?.length !== NONCE_BYTES) issues.push(`${at}.nonce: must be ${NONCE_BYTES} bytes`);
  if (!ciphertext || ciphertext.length < TAG_BYTES || ciphertext.length > MAX_SECRET_VALUE_BYTES + TAG_BYTES)
    issues.push(`${at}.ciphertext: must be ${TAG_BYTES} to ${MAX_SECRET_VALUE_BYTES + TAG_BYTES} bytes`);
  if (issues.length > before) return null;
  return { name: r.name as string, ephemeralKey: ephemeralKey!, nonce: nonce!, ciphertext: ciphertext! };
}

/** Checks every field (SECRETS_RECORD_INVALID lists every problem) before anything is decrypted. */
export function parseSecretsRecord(record: unknown): ParsedRecord {
  if (typeof record !== 'object' || record === null || Array.isArray(record))
    throw new SecretsRecordInvalidError(['must be an object']);
  const r = record as Record<string, unknown>;
  const issues: string[] = [];
  if (r.$type !== undefined && r.$type !== SECRETS_NSID) issues.push(`$type: must be ${SECRETS_NSID}`);
  if (!isDid(r.runner)) issues.push('runner: must be a DID');
  if (!isX25519DidKey(r.recipientKey)) issues.push('recipientKey: must be an X25519 did:key');
  if (r.algorithm !== SECRETS_ALGORITHM) issues.push(`algorithm: must be ${SECRETS_ALGORITHM}`);
  issues.push(...codeIssues(r.code));
  if (!isDatetime(r.createdAt)) issues.push('createdAt: must be a datetime');
  const entries: ParsedEntry[] = [];
  if (!Array.isArray(r.entries)) issues.push('entries: must be an array');
  else if (r.entries.length > MAX_SECRET_ENTRIES)
    issues.push(`entries: at most ${MAX_SECRET_ENTRIES}, not ${r.entries.length}`);
  else {
    const seen = new Set<string>();
    r.entries.forEach((e, i) => {
      const parsed = parseEntry(e, `entries[${i}]`, seen, issues);
      if (parsed) entries.push(parsed);
    });
  }
  if (issues.length > 0) throw new SecretsRecordInvalidError(issues);
  return {
    runner: r.runner as string,
    recipientKey: r.recipientKey as string,
    ...(r.code !== undefined ? { code: r.code as string } : {}),
    entries,
  };
}

function openEntry(e: ParsedEntry, key: X25519PrivateKey, bound: Parameters<typeof entryAad>[0]): string {
  let plaintext: Uint8Array;
  try {
    const recipientPub = decodeX25519DidKey(bound.recipientKey);
    plaintext = openBox(key, recipientPub, e, { info: HKDF_INFO, aad: entryAad(bound, e.name) });
  } catch {
    throw new SecretsTamperedError(e.name);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(plaintext);
  } catch {
    throw new SecretsRecordInvalidError([`entries: the value of ${JSON.stringify(e.name)} is not UTF-8`]);
  } finally {
    plaintext.fill(0);
  }
}

/**
 * The values of a secrets record, by name, for one execution of this runner; or a typed refusal: the record is
 * malformed, addressed to another runner, restricted to another code, sealed to a key this runner does not hold or
 * has retired, or an entry fails authentication. Nothing is returned unless every entry opens.
 */
export function openEntries(record: unknown, ctx: OpenContext): Record<string, string> {
  const r = parseSecretsRecord(record);
  const uriIssues = recordUriIssues(ctx.recordUri);
  if (uriIssues.length > 0) throw new SecretsRecordInvalidError(uriIssues);
  if (r.runner !== ctx.runnerDid) throw new SecretsRunnerMismatchError(r.runner, ctx.runnerDid);
  if (r.code !== undefined && r.code !== ctx.codeUri && r.code !== ctx.aliasUri)
    throw new SecretsCodeMismatchError(r.code, ctx.aliasUri ?? ctx.codeUri);
  const key = ctx.keyFor(r.recipientKey, ctx.now);
  const bound = {
    recordUri: ctx.recordUri,
    runner: r.runner,
    recipientKey: r.recipientKey,
    ...(r.code !== undefined ? { code: r.code } : {}),
  };
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const e of r.entries) out[e.name] = openEntry(e, key, bound);
  return out;
}
