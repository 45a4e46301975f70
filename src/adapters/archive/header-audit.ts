// A strict walk over the 512-byte block structure of a tar archive. It never hands out file data: its job
// is to see what tar-stream's extractor hides (tar-stream consumes PAX/GNU metadata headers silently, lets
// the last of several win, reads numeric fields with parseInt, skips zero blocks and reads on) and to
// report every framing or metadata irregularity that makes parsers disagree.
//
// It produces, per entry, the view a strict Go-archive/tar-like reader would have (name, link target,
// type, size, header offset). validateArchive compares that list with what tar-stream emitted; any
// difference is a PARSER_DIFFERENTIAL. When the framing itself becomes untrustworthy (bad checksum,
// conflicting sizes, sparse maps, sizes on header-only types) the audit stops and sets `trustedEnd`: only
// bytes before it are given to tar-stream, so neither parser reads past the point where they could
// disagree on where the next header starts.

import type { ArchiveLimits } from '../../domain/at-run/archive-limits.ts';
import { ByteChunks } from './chunks.ts';
import type { ArchiveViolationCode } from './codes.ts';

export const BLOCK = 512;
/** PAX and GNU long-name payloads above this are refused (Go caps at 1 MiB after CVE-2022-2879). */
export const MAX_METADATA_BYTES = 64 * 1024;

export interface AuditViolation {
  code: ArchiveViolationCode;
  path?: string;
  message: string;
}

/** The strict reader's view of one entry. `tsType` uses tar-stream's type names for comparison. */
export interface AuditRecord {
  /** Offset of the entry's own header block (after its metadata headers). */
  offset: number;
  /** Offset of its first metadata header, or `offset` when it has none. */
  metaOffset: number;
  typeflag: string;
  name: string;
  linkname: string;
  size: number;
  tsType: string | null;
}

export interface AuditResult {
  records: AuditRecord[];
  violations: AuditViolation[];
  /** Bytes handed to tar-stream (followed by a fresh end marker): everything before the end-of-archive marker or the first untrustworthy header. */
  trustedEnd: number;
}

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
const HEADER_ONLY_TYPES = new Set(['1', '2', '3', '4', '5', '6']);
const utf8Strict = new TextDecoder('utf-8', { fatal: true });
const utf8Lossy = new TextDecoder('utf-8');

function isZero(b: Uint8Array): boolean {
  for (let i = 0; i < b.length; i++) if (b[i] !== 0) return false;
  return true;
}

const cstr = (b: Uint8Array): Uint8Array => {
  const nul = b.indexOf(0);
  return nul === -1 ? b : b.subarray(0, nul);
};

function isUtf8(b: Uint8Array): boolean {
  try {
    utf8Strict.decode(b);
    return true;
  } catch {
    return false;
  }
}

/**
 * A numeric header field: octal digits surrounded only by spaces/NULs, or positive base-256 (0x80 prefix).
 * Returns null for anything else (negative base-256, garbage after the digits, `parseInt`-style prefixes).
 */
export function parseNumericField(field: Uint8Array): number | null {
  if (field.length === 0) return null;
  if ((field[0]! & 0x80) !== 0) {
    if (field[0] !== 0x80) return null;
    let v = 0;
    for (let i = 1; i < field.length; i++) {
      v = v * 256 + field[i]!;
      if (v > Number.MAX_SAFE_INTEGER) return null;
    }
    return v;
  }
  let i = 0;
  while (i < field.length && (field[i] === 0x20 || field[i] === 0)) i++;
  const start = i;
  while (i < field.length && field[i]! >= 0x30 && field[i]! <= 0x37) i++;
  const end = i;
  while (i < field.length && (field[i] === 0x20 || field[i] === 0)) i++;
  if (i !== field.length) return null;
  if (start === end) return 0;
  const v = parseInt(Buffer.from(field.subarray(start, end)).toString('latin1'), 8);
  return Number.isSafeInteger(v) ? v : null;
}

function headerChecksum(block: Uint8Array): number {
  let sum = 8 * 0x20;
  for (let i = 0; i < 148; i++) sum += block[i]!;
  for (let i = 156; i < BLOCK; i++) sum += block[i]!;
  return sum;
}

type Format = 'posix' | 'gnu' | null;
function formatOf(block: Uint8Array): Format {
  const magic = Buffer.from(block.subarray(257, 263)).toString('latin1');
  const version = Buffer.from(block.subarray(263, 265)).toString('latin1');
  if (magic === 'ustar\0' && version === '00') return 'posix';
  if (magic === 'ustar ' && version === ' \0') return 'gnu';
  return null;
}

interface PaxParse {
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

interface Pending {
  start: number;
  pax: Map<string, string> | null;
  paxRaw: Map<string, Uint8Array>;
  longName: string | null;
  longLink: string | null;
  /** Violations about this entry's metadata, reported with the entry's name once known. */
  deferred: AuditViolation[];
  seen: { x: number; L: number; K: number };
  reportedMixed: boolean;
}

function tsTypeOf(typeflag: string, name: string): string | null {
  switch (typeflag) {
    case '0':
      return 'file';
    case '\0':
      // Go reads an old-style regular file whose name ends in "/" as a directory.
      return name.endsWith('/') ? 'directory' : 'file';
    case '1':
      return 'link';
    case '2':
      return 'symlink';
    case '3':
      return 'character-device';
    case '4':
      return 'block-device';
    case '5':
      return 'directory';
    case '6':
      return 'fifo';
    case '7':
      return 'contiguous-file';
    default:
      return null;
  }
}

/** Records one metadata header (PAX `x`, GNU long name `L` or long link `K`) on the entry it precedes. */
function readMetadataHeader(p: Pending, kind: 'x' | 'L' | 'K', data: Uint8Array, off: number): void {
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
function readPaxEntryRecords(
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

/** Reports what an entry's type flag says about it; true when the walk cannot go past it (its framing is unknown). */
function judgeEntryType(
  typeflag: string,
  block: Uint8Array,
  limits: ArchiveLimits,
  add: (code: ArchiveViolationCode, message: string) => void,
): boolean {
  let fatal = false;
  switch (typeflag) {
    case '0':
    case '\0':
    case '1':
    case '2':
    case '5':
      break;
    case '3':
    case '4':
      add(
        'DEVICE_ENTRY',
        `${typeflag === '3' ? 'character' : 'block'} device ${parseNumericField(block.subarray(329, 337))}:${parseNumericField(block.subarray(337, 345))}`,
      );
      break;
    case '6':
      add('FIFO_ENTRY', 'FIFO');
      break;
    case '7':
      add('UNSUPPORTED_TYPE', 'contiguous file (type 7)');
      break;
    case 'S': {
      add('SPARSE_ENTRY', 'GNU sparse file (type S)');
      const realSize = parseNumericField(block.subarray(483, 495));
      if (realSize !== null && realSize > limits.maxFileBytes)
        add('FILE_TOO_LARGE', `sparse file claims ${realSize} bytes (limit ${limits.maxFileBytes})`);
      fatal = true; // its extension blocks are invisible to tar-stream
      break;
    }
    case 'D':
      add('UNSUPPORTED_TYPE', 'GNU incremental dump directory (type D)');
      break;
    case 'N':
    case 'V':
    case 'M':
      // tar-stream reads N as a long-name header; V and M are multi-volume bookkeeping.
      add('UNSUPPORTED_TYPE', `GNU type ${typeflag} (parsers disagree on its framing)`);
      fatal = true;
      break;
    default:
      add('UNSUPPORTED_TYPE', `entry type ${JSON.stringify(typeflag)}`);
  }
  return fatal;
}

/**
 * An entry's name and link target as its header fields and the GNU long-name headers before it say (PAX records
 * are applied after). The ustar fields only matter when no PAX/GNU record replaces them (writers may cut a
 * multi-byte character when they fill the 100-byte field of a name that lives in a PAX record).
 */
function entryNames(
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

/** A header's format and size, or why the walk cannot trust it (a bad checksum, an unknown format or size). */
function headerFraming(
  block: Uint8Array,
  off: number,
): { format: NonNullable<Format>; size: number } | { code: ArchiveViolationCode; message: string } {
  const stored = parseNumericField(block.subarray(148, 156));
  if (stored === null || stored !== headerChecksum(block))
    return { code: 'BAD_CHECKSUM', message: `header at byte ${off} has a bad checksum` };
  const format = formatOf(block);
  if (format === null)
    return { code: 'UNKNOWN_FORMAT', message: `header at byte ${off} is neither POSIX ustar nor GNU tar` };
  const size = parseNumericField(block.subarray(124, 136));
  if (size === null) return { code: 'BAD_NUMERIC_FIELD', message: `header at byte ${off} has a malformed size field` };
  return { format, size };
}

/** Audits the archive in `input` (one buffer, or the chunks it arrived in: the walk is the same). */
export function auditArchive(input: Buffer | ByteChunks, limits: ArchiveLimits): AuditResult {
  const buf = input instanceof ByteChunks ? input : ByteChunks.of(input);
  const audit = new HeaderAudit(limits);
  audit.advance(buf, true);
  return { records: audit.records, violations: audit.violations, trustedEnd: audit.trustedEnd(buf.length) };
}

/**
 * The same walk, resumable: `advance` audits as far as the bytes received so far allow and returns false when it
 * needs more (`final` = no more will come; then it always finishes, exactly as auditArchive). Used on a download
 * as it arrives (stream.ts). The one thing it does not wait for is a regular file's data: an entry header is
 * audited and recorded as soon as it arrives, and if the archive ends before that entry's data does, the final
 * call takes the record back and stops there with ARCHIVE_TRUNCATED, as auditArchive would have.
 */
export class HeaderAudit {
  readonly records: AuditRecord[] = [];
  readonly violations: AuditViolation[] = [];
  readonly #limits: ArchiveLimits;
  #trustedEnd = Number.POSITIVE_INFINITY;
  #off = 0;
  #pending: Pending | null = null;
  /** The last recorded entry while its data has not all arrived. */
  #open: { record: AuditRecord; dataEnd: number; pending: Pending | null } | null = null;
  #done = false;

  constructor(limits: ArchiveLimits) {
    this.#limits = limits;
  }

  get done(): boolean {
    return this.#done;
  }

  /** Every header before this offset is audited (a pending entry's metadata headers are not yet). */
  get auditedEnd(): number {
    return this.#pending ? this.#pending.start : this.#off;
  }

  /** Bytes that may be handed to tar-stream once the audit is done (see AuditResult). */
  trustedEnd(length: number): number {
    return Math.min(this.#trustedEnd, length);
  }

  advance(buf: ByteChunks, final: boolean): boolean {
    if (this.#done) return true;
    const limits = this.#limits;
    const violations = this.violations;
    const records = this.records;
    let off = this.#off;
    let pending = this.#pending;
    const needMore = (): false => {
      this.#off = off;
      this.#pending = pending;
      return false;
    };

    const add = (code: ArchiveViolationCode, message: string, path?: string): void => {
      violations.push({ code, message, ...(path !== undefined ? { path } : {}) });
    };
    const stop = (code: ArchiveViolationCode, message: string, path?: string): void => {
      add(code, message, path);
      this.#trustedEnd = Math.min(this.#trustedEnd, pending ? pending.start : off);
    };
    const newPending = (): Pending => ({
      start: off,
      pax: null,
      paxRaw: new Map(),
      longName: null,
      longLink: null,
      deferred: [],
      seen: { x: 0, L: 0, K: 0 },
      reportedMixed: false,
    });

    for (;;) {
      if (this.#open && this.#open.dataEnd <= buf.length) this.#open = null;
      if (off + BLOCK > buf.length) {
        if (!final) return needMore();
        if (this.#open) {
          // The archive ended inside the data of the entry recorded last.
          const o = this.#open;
          this.#open = null;
          records.pop();
          pending = o.pending;
          off = o.record.offset;
          stop(
            'ARCHIVE_TRUNCATED',
            `entry at byte ${off} claims ${o.record.size} bytes past the end of the archive`,
            o.record.name,
          );
          break;
        }
        if (off < buf.length) stop('ARCHIVE_TRUNCATED', `the archive ends inside a header block at byte ${off}`);
        else add('ARCHIVE_TRUNCATED', 'the archive has no end-of-archive marker (two zero blocks)');
        if (pending)
          add('DANGLING_METADATA_HEADER', `metadata header at byte ${pending.start} is not followed by an entry`);
        break;
      }
      const block = buf.slice(off, off + BLOCK);
      if (isZero(block)) {
        if (!final) return needMore(); // what follows the marker is judged once everything is in
        if (pending)
          add(
            'DANGLING_METADATA_HEADER',
            `metadata header at byte ${pending.start} is followed by the end of the archive`,
          );
        pending = null;
        // Everything after the first zero block must be zero: a lone zero block followed by data is an
        // error to Go, the end to GNU tar, and skipped by tar-stream, which reads on.
        if (!buf.isZeroFrom(off + BLOCK)) {
          const second = buf.slice(off + BLOCK, off + 2 * BLOCK);
          stop(
            'TRAILING_DATA',
            isZero(second)
              ? `non-zero bytes follow the end-of-archive marker at byte ${off}`
              : `a lone zero block at byte ${off} is followed by more data (some parsers stop, others read on)`,
          );
        }
        this.#trustedEnd = Math.min(this.#trustedEnd, off); // tar-stream gets the entries and a fresh end marker, no padding
        break;
      }

      const framing = headerFraming(block, off);
      if ('code' in framing) {
        stop(framing.code, framing.message);
        break;
      }
      const { format, size } = framing;
      const typeflag = String.fromCharCode(block[156]!);
      const dataStart = off + BLOCK;
      const next = dataStart + Math.ceil(size / BLOCK) * BLOCK;
      const isMetadata = typeflag === 'x' || typeflag === 'g' || typeflag === 'L' || typeflag === 'K';
      // A metadata header is read with its payload: wait for it (nothing of this header is recorded yet).
      if (isMetadata && dataStart + size > buf.length && !final) return needMore();
      for (const [field, start, len] of [
        ['mode', 100, 8],
        ['uid', 108, 8],
        ['gid', 116, 8],
        ['mtime', 136, 12],
      ] as const) {
        if (parseNumericField(block.subarray(start, start + len)) === null)
          add('BAD_NUMERIC_FIELD', `header at byte ${off} has a malformed ${field} field`);
      }

      // Metadata headers: PAX (x), PAX global (g), GNU long name (L), GNU long link (K).
      if (isMetadata) {
        if (dataStart + size > buf.length) {
          stop('ARCHIVE_TRUNCATED', `metadata header at byte ${off} claims ${size} bytes past the end of the archive`);
          break;
        }
        const data = buf.slice(dataStart, dataStart + size);
        if (size > MAX_METADATA_BYTES)
          add('HEADER_TOO_LARGE', `${typeflag} header at byte ${off} is ${size} bytes (limit ${MAX_METADATA_BYTES})`);
        if (typeflag === 'g') {
          const parsed = parsePaxRecords(data);
          for (const p of parsed.problems) add('PAX_MALFORMED', `global header at byte ${off}: ${p}`);
          add(
            'PAX_GLOBAL_HEADER',
            `PAX global header at byte ${off} (${[...parsed.records.keys()].join(', ') || 'empty'}): parsers disagree on whether it applies to later entries`,
          );
          off = next;
          continue;
        }
        pending ??= newPending();
        readMetadataHeader(pending, typeflag as 'x' | 'L' | 'K', data, off);
        off = next;
        continue;
      }

      // An entry header.
      const p = pending;
      const meta = p?.pax ?? null;
      let { name, linkname } = entryNames(block, format, p, (message, path) =>
        add('NON_UTF8_NAME', `header at byte ${off}: ${message}`, path),
      );
      let paxSize: number | null = null;
      if (p && meta) {
        const read = readPaxEntryRecords(p, meta, limits);
        name = read.name ?? name;
        linkname = read.linkname ?? linkname;
        paxSize = read.paxSize;
      }
      for (const d of p?.deferred ?? []) violations.push({ ...d, path: name });
      pending = null;
      const metaOffset = p ? p.start : off;

      if (paxSize !== null && paxSize !== size) {
        pending = p; // so `stop` rewinds to the first metadata header of this entry
        if (paxSize === -1)
          stop(
            'PAX_MALFORMED',
            `PAX size ${JSON.stringify(meta?.get('size')?.slice(0, 40))} is not a decimal byte count: where the next header starts is unknown`,
            name,
          );
        else
          stop(
            'PAX_SIZE_CONFLICT',
            `PAX size ${paxSize} differs from the header size ${size} at byte ${off}: parsers would frame the archive differently`,
            name,
          );
        break;
      }

      const fatal = judgeEntryType(typeflag, block, limits, (code, message) => add(code, message, name));
      if (fatal) {
        pending = p;
        this.#trustedEnd = Math.min(this.#trustedEnd, metaOffset);
        break;
      }
      if (HEADER_ONLY_TYPES.has(typeflag) && size > 0) {
        pending = p;
        stop(
          'HEADER_ONLY_TYPE_WITH_SIZE',
          `type ${typeflag} header at byte ${off} has size ${size}: some parsers skip that many bytes, others read the next header there`,
          name,
        );
        break;
      }
      const record: AuditRecord = {
        offset: off,
        metaOffset,
        typeflag,
        name,
        linkname,
        size,
        tsType: tsTypeOf(typeflag, name),
      };
      if (dataStart + size > buf.length) {
        if (final) {
          pending = p;
          stop('ARCHIVE_TRUNCATED', `entry at byte ${off} claims ${size} bytes past the end of the archive`, name);
          break;
        }
        this.#open = { record, dataEnd: dataStart + size, pending: p };
      }
      records.push(record);
      off = next;
    }
    this.#done = true;
    this.#off = off;
    this.#pending = pending;
    return true;
  }
}
