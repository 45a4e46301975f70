// Reading the metadata headers before a tar entry: PAX records (x), GNU long names (L) and long links (K), and
// the name, link target and size they give the entry.
//
// tar-stream consumes these headers silently and lets the last of several win; the audit instead keeps every one
// an entry has (Pending), reports what makes parsers disagree (repeats, mixed kinds, malformed or refused records,
// non-UTF-8 names) against the entry once its name is known, and applies them the way a strict reader would.
import type { ArchiveLimits } from '../../domain/at-run/archive-limits.ts';
import type { ArchiveViolationCode } from './codes.ts';
import { cstr, isUtf8, isZero, utf8Lossy } from './tar-header-block.ts';

/** PAX and GNU long-name payloads above this are refused (Go caps at 1 MiB after CVE-2022-2879). */
export const MAX_METADATA_BYTES = 64 * 1024;

const PAX_ALLOWED_KEYS = new Set([
  'path',
  'linkpath',
  'size',
  'mtime',
  'atime',
  'ctime',
  'uid',
  'gid',
  'uname',
  'gname',
]);
/** Records some writers add (node-tar, star, bsdtar) that no extractor acts on; they are dropped on rewrite. */
const PAX_IGNORED_KEYS = new Set(['comment', 'SCHILY.dev', 'SCHILY.ino', 'SCHILY.nlink', 'LIBARCHIVE.creationtime']);

export interface PaxParse {
  records: Map<string, string>;
  rawValues: Map<string, Uint8Array>;
  problems: string[];
}

/** Strict PAX records: `<decimal length> <key>=<value>\n`, lengths exact, no leftovers, no duplicate keys. */
export function parsePaxRecords(data: Uint8Array): PaxParse {
  const records = new Map<string, string>();
  const rawValues = new Map<string, Uint8Array>();
  const problems: string[] = [];
  let pos = 0;
  while (pos < data.length) {
    const sp = data.indexOf(0x20, pos);
    const lenText = sp === -1 ? '' : Buffer.from(data.subarray(pos, sp)).toString('latin1');
    if (!/^[1-9][0-9]{0,8}$/.test(lenText)) {
      problems.push(`record at byte ${pos} does not start with a decimal length and a space`);
      break;
    }
    const recLen = Number(lenText);
    if (pos + recLen > data.length || recLen <= lenText.length + 1) {
      problems.push(`record at byte ${pos} claims ${recLen} bytes, past the end of the header`);
      break;
    }
    if (data[pos + recLen - 1] !== 0x0a) {
      problems.push(`record at byte ${pos} is not terminated by a newline`);
      break;
    }
    const kv = data.subarray(sp + 1, pos + recLen - 1);
    const eq = kv.indexOf(0x3d);
    if (eq <= 0) {
      problems.push(`record at byte ${pos} has no key=value`);
      break;
    }
    const keyBytes = kv.subarray(0, eq);
    const valueBytes = kv.subarray(eq + 1);
    const key = utf8Lossy.decode(keyBytes);
    if (!isUtf8(keyBytes) || keyBytes.some((b) => b < 0x20 || b === 0x7f))
      problems.push(`record key ${JSON.stringify(key)} is not printable UTF-8`);
    if (records.has(key)) problems.push(`record ${JSON.stringify(key)} appears twice`);
    records.set(key, utf8Lossy.decode(valueBytes));
    rawValues.set(key, valueBytes);
    pos += recLen;
  }
  return { records, rawValues, problems };
}

/** A violation about an entry's metadata: its path is added once the entry's name is known. */
export interface DeferredViolation {
  code: ArchiveViolationCode;
  message: string;
}

/** The metadata headers read so far for the entry that follows them. */
export interface Pending {
  start: number;
  pax: Map<string, string> | null;
  paxRaw: Map<string, Uint8Array>;
  longName: string | null;
  longLink: string | null;
  /** Violations about this entry's metadata, reported with the entry's name once known. */
  deferred: DeferredViolation[];
  seen: { x: number; L: number; K: number };
  reportedMixed: boolean;
}

/** No metadata yet, for an entry whose first metadata header is at `start`. */
export function newPending(start: number): Pending {
  return {
    start,
    pax: null,
    paxRaw: new Map(),
    longName: null,
    longLink: null,
    deferred: [],
    seen: { x: 0, L: 0, K: 0 },
    reportedMixed: false,
  };
}

/** Records one metadata header (PAX `x`, GNU long name `L` or long link `K`) on the entry it precedes. */
export function readMetadataHeader(p: Pending, kind: 'x' | 'L' | 'K', data: Uint8Array, off: number): void {
  p.seen[kind]++;
  if (p.seen[kind] > 1)
    p.deferred.push({
      code: 'REPEATED_METADATA_HEADER',
      message: `a second ${kind} header at byte ${off} for the same entry (parsers keep the first, the last, or merge)`,
    });
  if (!p.reportedMixed && p.seen.x > 0 && p.seen.L + p.seen.K > 0) {
    p.reportedMixed = true;
    p.deferred.push({
      code: 'MIXED_METADATA_HEADERS',
      message: `PAX and GNU long-name headers before the same entry (byte ${p.start})`,
    });
  }
  if (kind === 'x') {
    const parsed = parsePaxRecords(data);
    for (const problem of parsed.problems)
      p.deferred.push({ code: 'PAX_MALFORMED', message: `PAX header at byte ${off}: ${problem}` });
    p.pax ??= new Map();
    for (const [k, v] of parsed.records) {
      p.pax.set(k, v);
      p.paxRaw.set(k, parsed.rawValues.get(k)!);
    }
  } else {
    const name = cstr(data);
    if (!isZero(data.subarray(name.length)))
      p.deferred.push({ code: 'NUL_IN_NAME', message: `GNU ${kind} header at byte ${off} hides bytes after a NUL` });
    if (!isUtf8(name))
      p.deferred.push({ code: 'NON_UTF8_NAME', message: `GNU ${kind} header at byte ${off} is not UTF-8` });
    if (kind === 'L') p.longName = utf8Lossy.decode(name);
    else p.longLink = utf8Lossy.decode(name);
  }
}

/**
 * Judges the PAX records that precede an entry: the path and link they set, the keys refused, and the size they
 * claim (`paxSize`: null when none, -1 when unreadable, so the framing is unknown).
 */
export function readPaxEntryRecords(
  p: Pending,
  meta: Map<string, string>,
  limits: ArchiveLimits,
): { name?: string; linkname?: string; paxSize: number | null } {
  let name: string | undefined;
  let linkname: string | undefined;
  let paxSize: number | null = null;
  const path = meta.get('path');
  if (path !== undefined) {
    if (path === '')
      p.deferred.push({
        code: 'PAX_MALFORMED',
        message: 'empty PAX path record (some parsers use it, others fall back to the header name)',
      });
    if (!isUtf8(p.paxRaw.get('path')!)) p.deferred.push({ code: 'NON_UTF8_NAME', message: 'PAX path is not UTF-8' });
    name = path;
  }
  const linkpath = meta.get('linkpath');
  if (linkpath !== undefined) {
    if (!isUtf8(p.paxRaw.get('linkpath')!))
      p.deferred.push({ code: 'NON_UTF8_NAME', message: 'PAX linkpath is not UTF-8' });
    linkname = linkpath;
  }
  for (const [key, value] of meta) {
    if (PAX_ALLOWED_KEYS.has(key)) {
      const numeric =
        key === 'uid' || key === 'gid'
          ? /^[0-9]{1,64}$/
          : key.endsWith('time')
            ? /^-?[0-9]{1,64}(\.[0-9]{1,64})?$/
            : null;
      if (numeric && !numeric.test(value))
        p.deferred.push({
          code: 'PAX_MALFORMED',
          message: `PAX ${key}=${JSON.stringify(value.slice(0, 40))} is not a number`,
        });
    } else if (PAX_IGNORED_KEYS.has(key)) {
      // harmless bookkeeping
    } else if (key.startsWith('GNU.sparse.')) {
      p.deferred.push({ code: 'SPARSE_ENTRY', message: `PAX ${key} record: GNU sparse files are refused` });
      if (key === 'GNU.sparse.realsize' || key === 'GNU.sparse.size') {
        const logical = Number(value);
        if (Number.isFinite(logical) && logical > limits.maxFileBytes) {
          p.deferred.push({
            code: 'FILE_TOO_LARGE',
            message: `sparse file claims ${logical} bytes (limit ${limits.maxFileBytes})`,
          });
        }
      }
    } else if (/^(SCHILY|LIBARCHIVE)\.xattr\./.test(key) || key.startsWith('RHT.security.')) {
      p.deferred.push({ code: 'PAX_XATTR', message: `PAX ${key}: extended attributes are refused` });
    } else {
      p.deferred.push({ code: 'PAX_UNSUPPORTED_KEY', message: `PAX record ${JSON.stringify(key)} is not accepted` });
    }
  }
  const sizeText = meta.get('size');
  if (sizeText !== undefined) {
    const n = /^[0-9]{1,64}$/.test(sizeText) ? Number(sizeText) : NaN;
    paxSize = Number.isSafeInteger(n) ? n : -1; // -1: unreadable, so the framing is unknown
  }
  return { ...(name !== undefined ? { name } : {}), ...(linkname !== undefined ? { linkname } : {}), paxSize };
}

/**
 * An entry's name and link target as its header fields and the GNU long-name headers before it say (PAX records
 * are applied after). The ustar fields only matter when no PAX/GNU record replaces them (writers may cut a
 * multi-byte character when they fill the 100-byte field of a name that lives in a PAX record).
 */
export function entryNames(
  block: Uint8Array,
  format: string,
  p: Pending | null,
  nonUtf8: (message: string, path: string) => void,
): { name: string; linkname: string } {
  const nameBytes = cstr(block.subarray(0, 100));
  const prefixBytes = format === 'posix' && block[345] !== 0 ? cstr(block.subarray(345, 500)) : null;
  const linkBytes = cstr(block.subarray(157, 257));
  let name = prefixBytes
    ? `${utf8Lossy.decode(prefixBytes)}/${utf8Lossy.decode(nameBytes)}`
    : utf8Lossy.decode(nameBytes);
  let linkname = utf8Lossy.decode(linkBytes);
  const meta = p?.pax ?? null;
  if (p?.longName !== null && p?.longName !== undefined) name = p.longName;
  if (p?.longLink !== null && p?.longLink !== undefined) linkname = p.longLink;
  const ustarNameUsed = (p?.longName ?? null) === null && meta?.get('path') === undefined;
  const ustarLinkUsed = (p?.longLink ?? null) === null && meta?.get('linkpath') === undefined;
  if (ustarNameUsed && (!isUtf8(nameBytes) || (prefixBytes && !isUtf8(prefixBytes))))
    nonUtf8('the name is not UTF-8', name);
  if (ustarLinkUsed && !isUtf8(linkBytes)) nonUtf8('the link target is not UTF-8', name);
  return { name, linkname };
}
