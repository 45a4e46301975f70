// AT Protocol identifier syntax (DID, handle, NSID, record key, AT URI), checked without IO.
// AT URIs follow the spec's restricted syntax: at://AUTHORITY[/COLLECTION[/RKEY]], no query, no fragment.

import { atprotoValidationError } from './errors.ts';

const DID_RE = /^did:[a-z]+:[a-zA-Z0-9._:%-]*[a-zA-Z0-9._-]$/;
const HANDLE_RE = /^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/;
const NSID_RE =
  /^[a-zA-Z](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+(?:\.[a-zA-Z](?:[a-zA-Z0-9]{0,62})?)$/;
const RKEY_RE = /^[a-zA-Z0-9_~.:-]{1,512}$/;
const AT_URI_MAX = 8192;

export function isValidDid(s: string): boolean {
  return s.length <= 2048 && DID_RE.test(s);
}

export function isValidHandle(s: string): boolean {
  return s.length <= 253 && HANDLE_RE.test(s);
}

export function isValidNsid(s: string): boolean {
  return s.length <= 253 + 1 + 63 && NSID_RE.test(s);
}

export function isValidRecordKey(s: string): boolean {
  return RKEY_RE.test(s) && s !== '.' && s !== '..';
}

/** A parsed AT URI. Exactly one of `did` / `handle` is set, according to the authority. */
export interface AtUri {
  uri: string;
  authority: string;
  did?: string;
  handle?: string;
  collection?: string;
  rkey?: string;
}

/** A parsed AT URI naming one record: collection and rkey are present. */
export interface RecordUri extends AtUri {
  collection: string;
  rkey: string;
}

function atUriIssues(uri: string): {
  issues: string[];
  parts?: { authority: string; collection?: string; rkey?: string };
} {
  if (uri.length > AT_URI_MAX) return { issues: [`longer than ${AT_URI_MAX} characters`] };
  if (!uri.startsWith('at://')) return { issues: ['must start with "at://"'] };
  const rest = uri.slice(5);
  if (/[?#]/.test(rest)) return { issues: ['query and fragment are not allowed'] };
  if (/[^a-zA-Z0-9._~:@!$&'()*+,;=%/-]/.test(rest)) return { issues: ['contains characters outside the AT URI set'] };
  const segments = rest.split('/');
  if (segments.length > 3) return { issues: ['more than three path segments (authority/collection/rkey)'] };
  const [authority = '', collection, rkey] = segments;
  const issues: string[] = [];
  if (!(isValidDid(authority) || isValidHandle(authority)))
    issues.push(`authority ${JSON.stringify(authority)} is neither a DID nor a handle`);
  if (collection !== undefined && !isValidNsid(collection))
    issues.push(`collection ${JSON.stringify(collection)} is not an NSID`);
  if (rkey !== undefined && !isValidRecordKey(rkey))
    issues.push(`record key ${JSON.stringify(rkey)} is not a valid record key`);
  return {
    issues,
    parts: { authority, ...(collection !== undefined ? { collection } : {}), ...(rkey !== undefined ? { rkey } : {}) },
  };
}

/** Parses an AT URI (restricted syntax). Throws ValidationError `AT_URI_INVALID` listing every issue. */
export function parseAtUri(uri: string): AtUri {
  if (typeof uri !== 'string')
    throw atprotoValidationError('AT_URI_INVALID', 'AT URI must be a string', ['not a string']);
  const { issues, parts } = atUriIssues(uri);
  if (issues.length > 0 || !parts) {
    throw atprotoValidationError(
      'AT_URI_INVALID',
      `invalid AT URI ${JSON.stringify(uri)}${issues.length === 1 ? `: ${issues[0]}` : ''}`,
      issues,
      { uri },
    );
  }
  const isDid = parts.authority.startsWith('did:');
  return {
    uri,
    authority: parts.authority,
    ...(isDid ? { did: parts.authority } : { handle: parts.authority.toLowerCase() }),
    ...(parts.collection !== undefined ? { collection: parts.collection } : {}),
    ...(parts.rkey !== undefined ? { rkey: parts.rkey } : {}),
  };
}

/** Parses an AT URI that must name a record (authority, collection and rkey). */
export function parseRecordUri(uri: string): RecordUri {
  const parsed = parseAtUri(uri);
  if (parsed.collection === undefined || parsed.rkey === undefined) {
    throw atprotoValidationError(
      'AT_URI_INVALID',
      `AT URI ${JSON.stringify(uri)} does not name a record (at://<did>/<collection>/<rkey>)`,
      ['collection and record key are required'],
      { uri },
    );
  }
  return parsed as RecordUri;
}

export function formatAtUri(authority: string, collection: string, rkey: string): string {
  return `at://${authority}/${collection}/${rkey}`;
}

export function assertDid(did: string): void {
  if (typeof did !== 'string' || !isValidDid(did)) {
    throw atprotoValidationError(
      'DID_INVALID',
      `invalid DID ${JSON.stringify(did)}`,
      ['does not match did:<method>:<id>'],
      { did },
    );
  }
}
