// validateArchive: one tar-stream parse that builds a virtual tree, checked against a strict header audit.
//
//  1. Before parsing: size limit, compression magic (compressed input is refused, so there is no
//     decompression and no compression bomb), a private copy of the bytes (nothing can change them while
//     they are checked). validateArchiveChunks takes chunks its caller hands over instead (a download it
//     owns): no copy, and file contents are kept as views into those chunks (see chunks.ts for why).
//  2. header-audit.ts walks the raw blocks: checksums, formats, numeric fields, PAX/GNU metadata, types,
//     framing. It decides how many bytes are trustworthy.
//  3. tar-stream parses those bytes once. Each entry is checked as it arrives (entry-checker.ts) against the
//     virtual tree of everything before it (names, parents, duplicates, links, modes, sizes), the way an
//     extractor would meet it, and kept (data included) for re-serialization.
//  4. The two views are compared entry by entry (PARSER_DIFFERENTIAL), then the finished tree is checked as
//     a whole: every symlink resolved through it, and the code-archive rules.
// Every violation found is reported, not only the first.

import { extract, type Header } from 'tar-stream';
import { ValidationError } from '../../domain/errors.ts';
import { archiveLimitsIssues, type ArchiveLimits } from '../../domain/at-run/archive-limits.ts';
import { archiveMemberPath } from '../../domain/at-run/safe-path.ts';
import { ByteChunks } from './chunks.ts';
import { Checker, type Retain } from './entry-checker.ts';
import { auditArchive, type AuditRecord } from './header-audit.ts';
import type { ArchiveViolationCode } from './codes.ts';
import type { ArchiveReport, ValidateOptions } from './types.ts';

const COMPRESSION_MAGIC: Array<[string, number[]]> = [
  ['gzip', [0x1f, 0x8b]],
  ['compress', [0x1f, 0x9d]],
  ['bzip2', [0x42, 0x5a, 0x68]],
  ['xz', [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]],
  ['zstd', [0x28, 0xb5, 0x2f, 0xfd]],
  ['lz4', [0x04, 0x22, 0x4d, 0x18]],
  ['lzip', [0x4c, 0x5a, 0x49, 0x50]],
];

export function compression(buf: Uint8Array): string | null {
  for (const [name, magic] of COMPRESSION_MAGIC) {
    if (buf.length >= magic.length && magic.every((b, i) => buf[i] === b)) return name;
  }
  return null;
}

export interface SeenEntry {
  offset: number;
  name: string;
  linkname: string;
  size: number;
  type: string | null;
}

/** What the parser's view of an entry is compared on (both validators keep one per header). */
export const seenEntry = (entry: { offset: number; header: Header }): SeenEntry => {
  const h = entry.header;
  return {
    offset: entry.offset,
    name: h.name,
    linkname: h.linkname ?? '',
    size: h.size,
    type: (h.type as string | null) ?? null,
  };
};

export interface TarStreamResult {
  seen: SeenEntry[];
  error?: string;
  stoppedEarly: boolean;
}

async function parseWithTarStream(
  feed: Iterable<Buffer>,
  checker: Checker,
  limits: ArchiveLimits,
): Promise<TarStreamResult> {
  const ex = extract();
  const it = ex[Symbol.asyncIterator]();
  const seen: SeenEntry[] = [];
  let error: string | undefined;
  let stoppedEarly = false;
  // Views, queued without copying; tar-stream's framing does not depend on how its input is cut.
  const parts = [...feed];
  for (const part of parts.slice(0, -1)) ex.write(part);
  ex.end(parts.at(-1) ?? Buffer.alloc(0));
  try {
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      const entry = r.value;
      const h = entry.header;
      seen.push(seenEntry(entry));
      if (++checker.count > limits.maxEntries) {
        checker.add('TOO_MANY_ENTRIES', `more than ${limits.maxEntries} entries; parsing stopped`, h.name);
        stoppedEarly = true;
        break;
      }
      if (h.type === 'directory' && h.size > 0) {
        // tar-stream never ends such an entry's stream; the audit refuses it before we get here.
        error = `directory ${h.name} carries ${h.size} bytes`;
        break;
      }
      const keep = checker.wantsData(h);
      const chunks: Buffer[] = [];
      for await (const chunk of entry as AsyncIterable<Buffer>) if (keep) chunks.push(chunk);
      checker.onEntry(h, keep ? chunks : undefined);
    }
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  } finally {
    await it.return?.().catch(() => undefined);
  }
  return { seen, ...(error !== undefined ? { error } : {}), stoppedEarly };
}

export function compareViews(
  expected: AuditRecord[],
  result: TarStreamResult,
  add: (code: ArchiveViolationCode, message: string, path?: string) => void,
): void {
  const n = Math.min(expected.length, result.seen.length);
  for (let i = 0; i < n; i++) {
    const a = expected[i]!;
    const t = result.seen[i]!;
    const diffs: string[] = [];
    if (a.offset !== t.offset) diffs.push(`header at byte ${a.offset} vs ${t.offset}`);
    if (a.name !== t.name)
      diffs.push(`name ${JSON.stringify(a.name.slice(0, 200))} vs ${JSON.stringify(t.name.slice(0, 200))}`);
    if (a.linkname !== t.linkname)
      diffs.push(
        `link target ${JSON.stringify(a.linkname.slice(0, 200))} vs ${JSON.stringify(t.linkname.slice(0, 200))}`,
      );
    if (a.size !== t.size) diffs.push(`size ${a.size} vs ${t.size}`);
    if (a.tsType !== t.type) diffs.push(`type ${a.tsType} vs ${t.type}`);
    if (diffs.length > 0)
      add(
        'PARSER_DIFFERENTIAL',
        `the strict reader and tar-stream disagree on entry ${i}: ${diffs.join('; ')}`,
        a.name,
      );
  }
  if (expected.length !== result.seen.length && !result.stoppedEarly && result.error === undefined) {
    add('PARSER_DIFFERENTIAL', `the strict reader found ${expected.length} entries, tar-stream ${result.seen.length}`);
  }
}

function optionsIssues(limits: ArchiveLimits, opts: ValidateOptions): { issues: string[]; prefix: string[] } {
  const issues = archiveLimitsIssues(limits, 'limits');
  if (opts?.kind !== 'runtime' && opts?.kind !== 'code') issues.push('opts.kind must be "runtime" or "code"');
  let prefix: string[] = [];
  if (opts?.stripPrefix !== undefined) {
    const pc = archiveMemberPath(opts.stripPrefix);
    if (pc.problems.length > 0 || pc.components.length === 0)
      issues.push(`opts.stripPrefix ${JSON.stringify(opts.stripPrefix)} must be a safe relative directory name`);
    else prefix = pc.components;
  }
  if (opts?.entrypoint !== undefined && typeof opts.entrypoint !== 'string')
    issues.push('opts.entrypoint must be a string');
  return { issues, prefix };
}

/** A verdict reached before parsing (too large, compressed, empty), or null. */
export function refusal(src: ByteChunks, limits: ArchiveLimits): ArchiveReport | null {
  const refuse = (code: ArchiveViolationCode, message: string): ArchiveReport => ({
    ok: false,
    violations: [{ code, message }],
    entries: [],
    expandedBytes: 0,
    topLevel: [],
  });
  if (src.length > limits.maxArchiveBytes)
    return refuse(
      'ARCHIVE_TOO_LARGE',
      `the archive is ${src.length} bytes (limit ${limits.maxArchiveBytes}); it was not parsed`,
    );
  const compressed = compression(src.slice(0, 8));
  if (compressed)
    return refuse('COMPRESSED_ARCHIVE', `the archive is ${compressed}-compressed; only plain tar is accepted`);
  if (src.length === 0) return refuse('EMPTY_ARCHIVE', 'the archive is empty (0 bytes)');
  return null;
}

export function checkedOptions(limits: ArchiveLimits, opts: ValidateOptions): string[] {
  const { issues, prefix } = optionsIssues(limits, opts);
  if (issues.length > 0)
    throw new ValidationError('ARCHIVE_OPTIONS_INVALID', 'invalid archive validation options', issues);
  return prefix;
}

/** Both views over bytes nobody else can change (a private copy, or chunks handed over). */
async function validateOwned(
  src: ByteChunks,
  limits: ArchiveLimits,
  opts: ValidateOptions,
  prefix: string[],
  retain: Retain,
): Promise<ArchiveReport> {
  const audit = auditArchive(src, limits);
  const checker = new Checker(limits, opts, prefix, retain);
  for (const v of audit.violations) checker.violations.push(v);
  const feed = audit.trustedEnd < src.length ? [...src.views(0, audit.trustedEnd), Buffer.alloc(1024)] : src.views();
  const result = await parseWithTarStream(feed, checker, limits);
  if (result.error !== undefined) checker.add('PARSE_ERROR', `tar-stream: ${result.error}`);
  compareViews(audit.records, result, (code, message, path) => checker.add(code, message, path));
  const topLevel = checker.finish();
  return {
    ok: checker.violations.length === 0,
    violations: checker.violations,
    entries: checker.entries,
    expandedBytes: checker.expandedBytes,
    topLevel,
  };
}

export async function validateArchive(
  bytes: Buffer,
  limits: ArchiveLimits,
  opts: ValidateOptions,
): Promise<ArchiveReport> {
  if (!(bytes instanceof Uint8Array))
    throw new ValidationError('ARCHIVE_OPTIONS_INVALID', 'archive bytes must be a Buffer', ['not a Buffer']);
  const prefix = checkedOptions(limits, opts);
  const refused = refusal(ByteChunks.of(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)), limits);
  if (refused) return refused;
  const buf = Buffer.from(bytes); // private copy: the caller cannot change the bytes between the two views
  return validateOwned(ByteChunks.of(buf), limits, opts, prefix, 'buffer');
}

/**
 * validateArchive over an archive given as the chunks it arrived in, which the caller HANDS OVER: they are
 * neither copied nor to be changed afterwards (a download nobody else holds). Every check is the same; a
 * kept file's bytes come back as `content` (views into the chunks) instead of `data`.
 */
export async function validateArchiveChunks(
  chunks: readonly Buffer[],
  limits: ArchiveLimits,
  opts: ValidateOptions,
): Promise<ArchiveReport> {
  if (!Array.isArray(chunks) || !chunks.every((c) => c instanceof Uint8Array))
    throw new ValidationError('ARCHIVE_OPTIONS_INVALID', 'archive chunks must be Buffers', ['not a list of Buffers']);
  const prefix = checkedOptions(limits, opts);
  const src = new ByteChunks(
    chunks.map((c) => (Buffer.isBuffer(c) ? c : Buffer.from(c.buffer, c.byteOffset, c.byteLength))),
  );
  return refusal(src, limits) ?? validateOwned(src, limits, opts, prefix, 'parts');
}
