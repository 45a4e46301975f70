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
//
// What one header block says is read in tar-header-block.ts, what the metadata headers before an entry say in
// tar-metadata-headers.ts; the walk here decides where each header starts and how far the bytes can be trusted.

import type { ArchiveLimits } from '../../domain/at-run/archive-limits.ts';
import { ByteChunks } from './chunks.ts';
import type { ArchiveViolationCode } from './codes.ts';
import { BLOCK, headerFraming, isZero, judgeEntryType, parseNumericField, tsTypeOf } from './tar-header-block.ts';
import {
  entryNames,
  MAX_METADATA_BYTES,
  newPending,
  parsePaxRecords,
  readMetadataHeader,
  readPaxEntryRecords,
  type Pending,
} from './tar-metadata-headers.ts';

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
  /**
   * Bytes handed to tar-stream (followed by a fresh end marker): everything before the end-of-archive marker or the
   * first untrustworthy header.
   */
  trustedEnd: number;
}

/** Types whose header carries no data: a size on one makes parsers frame the archive differently. */
const HEADER_ONLY_TYPES = new Set(['1', '2', '3', '4', '5', '6']);

/** How the walk goes on after a block: to the next one, waiting for more bytes, or ended. */
type Step = 'next' | 'more' | 'end';

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

  /** Walks on from where the last call stopped (see the class comment); false while it needs more bytes. */
  advance(buf: ByteChunks, final: boolean): boolean {
    if (this.#done) return true;
    for (;;) {
      if (this.#open && this.#open.dataEnd <= buf.length) this.#open = null;
      const step = this.#off + BLOCK > buf.length ? this.#atInputEnd(buf, final) : this.#atBlock(buf, final);
      if (step === 'more') return false;
      if (step === 'end') break;
    }
    this.#done = true;
    return true;
  }

  #add(code: ArchiveViolationCode, message: string, path?: string): void {
    this.violations.push({ code, message, ...(path !== undefined ? { path } : {}) });
  }

  /** Reports, and trusts nothing from the current header on (from its first metadata header, when it has any). */
  #stop(code: ArchiveViolationCode, message: string, path?: string): void {
    this.#add(code, message, path);
    this.#trustedEnd = Math.min(this.#trustedEnd, this.#pending ? this.#pending.start : this.#off);
  }

  /** No whole block left: wait for more, or (final) end there: inside an entry's data, a header, or unmarked. */
  #atInputEnd(buf: ByteChunks, final: boolean): Step {
    if (!final) return 'more';
    if (this.#open) {
      // The archive ended inside the data of the entry recorded last.
      const o = this.#open;
      this.#open = null;
      this.records.pop();
      this.#pending = o.pending;
      this.#off = o.record.offset;
      this.#stop(
        'ARCHIVE_TRUNCATED',
        `entry at byte ${this.#off} claims ${o.record.size} bytes past the end of the archive`,
        o.record.name,
      );
      return 'end';
    }
    const off = this.#off;
    if (off < buf.length) this.#stop('ARCHIVE_TRUNCATED', `the archive ends inside a header block at byte ${off}`);
    else this.#add('ARCHIVE_TRUNCATED', 'the archive has no end-of-archive marker (two zero blocks)');
    if (this.#pending)
      this.#add(
        'DANGLING_METADATA_HEADER',
        `metadata header at byte ${this.#pending.start} is not followed by an entry`,
      );
    return 'end';
  }

  /** The block at the walk's offset: the end marker, a metadata header or an entry header. */
  #atBlock(buf: ByteChunks, final: boolean): Step {
    const off = this.#off;
    const block = buf.slice(off, off + BLOCK);
    if (isZero(block)) return this.#atEndMarker(buf, final);

    const framing = headerFraming(block, off);
    if ('code' in framing) {
      this.#stop(framing.code, framing.message);
      return 'end';
    }
    const { format, size } = framing;
    const typeflag = String.fromCharCode(block[156]!);
    const dataStart = off + BLOCK;
    const isMetadata = typeflag === 'x' || typeflag === 'g' || typeflag === 'L' || typeflag === 'K';
    // A metadata header is read with its payload: wait for it (nothing of this header is recorded yet).
    if (isMetadata && dataStart + size > buf.length && !final) return 'more';
    for (const [field, start, len] of [
      ['mode', 100, 8],
      ['uid', 108, 8],
      ['gid', 116, 8],
      ['mtime', 136, 12],
    ] as const) {
      if (parseNumericField(block.subarray(start, start + len)) === null)
        this.#add('BAD_NUMERIC_FIELD', `header at byte ${off} has a malformed ${field} field`);
    }
    return isMetadata
      ? this.#atMetadataHeader(buf, typeflag, size)
      : this.#atEntryHeader(buf, final, block, format, typeflag, size);
  }

  /** A zero block: the end-of-archive marker, after which everything must be zero. */
  #atEndMarker(buf: ByteChunks, final: boolean): Step {
    if (!final) return 'more'; // what follows the marker is judged once everything is in
    const off = this.#off;
    if (this.#pending)
      this.#add(
        'DANGLING_METADATA_HEADER',
        `metadata header at byte ${this.#pending.start} is followed by the end of the archive`,
      );
    this.#pending = null;
    // Everything after the first zero block must be zero: a lone zero block followed by data is an
    // error to Go, the end to GNU tar, and skipped by tar-stream, which reads on.
    if (!buf.isZeroFrom(off + BLOCK)) {
      const second = buf.slice(off + BLOCK, off + 2 * BLOCK);
      this.#stop(
        'TRAILING_DATA',
        isZero(second)
          ? `non-zero bytes follow the end-of-archive marker at byte ${off}`
          : `a lone zero block at byte ${off} is followed by more data (some parsers stop, others read on)`,
      );
    }
    this.#trustedEnd = Math.min(this.#trustedEnd, off); // tar-stream gets the entries and a fresh end marker, no padding
    return 'end';
  }

  /** Metadata headers: PAX (x), PAX global (g), GNU long name (L), GNU long link (K). */
  #atMetadataHeader(buf: ByteChunks, typeflag: string, size: number): Step {
    const off = this.#off;
    const dataStart = off + BLOCK;
    if (dataStart + size > buf.length) {
      this.#stop(
        'ARCHIVE_TRUNCATED',
        `metadata header at byte ${off} claims ${size} bytes past the end of the archive`,
      );
      return 'end';
    }
    const data = buf.slice(dataStart, dataStart + size);
    if (size > MAX_METADATA_BYTES)
      this.#add('HEADER_TOO_LARGE', `${typeflag} header at byte ${off} is ${size} bytes (limit ${MAX_METADATA_BYTES})`);
    if (typeflag === 'g') {
      const parsed = parsePaxRecords(data);
      for (const p of parsed.problems) this.#add('PAX_MALFORMED', `global header at byte ${off}: ${p}`);
      this.#add(
        'PAX_GLOBAL_HEADER',
        `PAX global header at byte ${off} (${[...parsed.records.keys()].join(', ') || 'empty'}): ` +
          'parsers disagree on whether it applies to later entries',
      );
    } else {
      this.#pending ??= newPending(off);
      readMetadataHeader(this.#pending, typeflag as 'x' | 'L' | 'K', data, off);
    }
    this.#off = dataStart + Math.ceil(size / BLOCK) * BLOCK;
    return 'next';
  }

  /** An entry header: its name and size with its metadata applied, checked, and recorded. */
  #atEntryHeader(
    buf: ByteChunks,
    final: boolean,
    block: Uint8Array,
    format: 'posix' | 'gnu',
    typeflag: string,
    size: number,
  ): Step {
    const off = this.#off;
    const dataStart = off + BLOCK;
    const p = this.#pending;
    const meta = p?.pax ?? null;
    let { name, linkname } = entryNames(block, format, p, (message, path) =>
      this.#add('NON_UTF8_NAME', `header at byte ${off}: ${message}`, path),
    );
    let paxSize: number | null = null;
    if (p && meta) {
      const read = readPaxEntryRecords(p, meta, this.#limits);
      name = read.name ?? name;
      linkname = read.linkname ?? linkname;
      paxSize = read.paxSize;
    }
    for (const d of p?.deferred ?? []) this.violations.push({ ...d, path: name });
    this.#pending = null;
    const metaOffset = p ? p.start : off;

    if (paxSize !== null && paxSize !== size) {
      this.#pending = p; // so `stop` rewinds to the first metadata header of this entry
      if (paxSize === -1)
        this.#stop(
          'PAX_MALFORMED',
          `PAX size ${JSON.stringify(meta?.get('size')?.slice(0, 40))} is not a decimal byte count: ` +
            'where the next header starts is unknown',
          name,
        );
      else
        this.#stop(
          'PAX_SIZE_CONFLICT',
          `PAX size ${paxSize} differs from the header size ${size} at byte ${off}: parsers would frame the archive differently`,
          name,
        );
      return 'end';
    }

    const fatal = judgeEntryType(typeflag, block, this.#limits, (code, message) => this.#add(code, message, name));
    if (fatal) {
      this.#pending = p;
      this.#trustedEnd = Math.min(this.#trustedEnd, metaOffset);
      return 'end';
    }
    if (HEADER_ONLY_TYPES.has(typeflag) && size > 0) {
      this.#pending = p;
      this.#stop(
        'HEADER_ONLY_TYPE_WITH_SIZE',
        `type ${typeflag} header at byte ${off} has size ${size}: some parsers skip that many bytes, others read the next header there`,
        name,
      );
      return 'end';
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
        this.#pending = p;
        this.#stop('ARCHIVE_TRUNCATED', `entry at byte ${off} claims ${size} bytes past the end of the archive`, name);
        return 'end';
      }
      this.#open = { record, dataEnd: dataStart + size, pending: p };
    }
    this.records.push(record);
    this.#off = dataStart + Math.ceil(size / BLOCK) * BLOCK;
    return 'next';
  }
}
