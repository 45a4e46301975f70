// writeArchive / packArchive: a fresh, canonical tar built from validated entries — never the original bytes.
// Parsers disagree about the original (see test/fixtures/tars/README.md); they all agree about this output:
// POSIX ustar, PAX headers only for long or non-ASCII path/linkpath, types 0/5/2/1 only, normalized modes,
// uid/gid 0 without user or group names, mtime 0, no xattrs, no devices, entries in validated order.
// packArchive yields the archive piece by piece (headers, then file contents as given: no copy), so a 100 MB
// runtime goes from the download to the upload without being assembled; writeArchive collects the pieces.

import { pack, type Header } from 'tar-stream';
import { ValidationError } from '../../domain/errors.ts';
import { archiveMemberPath, canonicalRelativePath } from '../../domain/at-run/safe-path.ts';
import { normalizedMode } from './entry-checker.ts';
import type { ArchiveEntry } from './types.ts';

const FIXED = { uid: 0, gid: 0, mtime: new Date(0) } as const;
const BLOCK = 512;

/** A file entry's bytes as parts: `content`, or `data` as one part (none for an empty file). */
const partsOf = (e: ArchiveEntry): readonly Buffer[] => e.content ?? (e.data && e.data.length > 0 ? [e.data] : []);

function entryIssues(e: ArchiveEntry, i: number): string[] {
  const issues: string[] = [];
  const at = `entries[${i}] ${JSON.stringify(e?.path)}`;
  if (typeof e !== 'object' || e === null) return [`entries[${i}] is not an entry`];
  if (typeof e.path !== 'string') return [`${at}: path must be a string`];
  for (const p of canonicalRelativePath(e.path).problems) issues.push(`${at}: path ${p.message}`);
  switch (e.type) {
    case 'directory':
      break;
    case 'file': {
      if (e.content !== undefined && e.data !== undefined) issues.push(`${at}: give data or content, not both`);
      const parts = e.content ?? [e.data ?? Buffer.alloc(0)];
      if (!Array.isArray(parts) || !parts.every((d) => d instanceof Uint8Array))
        issues.push(`${at}: data must be a Buffer (content a list of Buffers)`);
      else {
        const length = parts.reduce((n, d) => n + d.length, 0);
        if (length !== e.size) issues.push(`${at}: size ${e.size} but ${length} bytes of data`);
      }
      break;
    }
    case 'symlink': {
      const target = e.linkname;
      if (typeof target !== 'string' || target === '') issues.push(`${at}: a symlink needs a target`);
      else
        for (const p of archiveMemberPath(target).problems)
          if (p.kind !== 'TRAVERSAL') issues.push(`${at}: symlink target ${p.message}`);
      break;
    }
    case 'hardlink': {
      const target = e.linkname;
      if (typeof target !== 'string') issues.push(`${at}: a hardlink needs a target`);
      else for (const p of canonicalRelativePath(target).problems) issues.push(`${at}: hardlink target ${p.message}`);
      break;
    }
    default:
      issues.push(`${at}: type ${JSON.stringify((e as { type?: unknown }).type)} cannot be written`);
  }
  return issues;
}

/**
 * The canonical archive of `entries`, as a sequence of buffers: header blocks (fresh), file contents (the
 * entries' own buffers, not copied), padding and the end marker. Throws ARCHIVE_WRITE_INVALID listing every
 * problem before yielding anything. The entries' bytes must not change until the sequence is consumed.
 */
export async function* packArchive(
  entries: readonly ArchiveEntry[],
  opts: { prefix?: string } = {},
): AsyncGenerator<Buffer, void, undefined> {
  const issues: string[] = [];
  let prefix: string[] = [];
  if (opts.prefix !== undefined) {
    const pc = canonicalRelativePath(opts.prefix);
    if (pc.problems.length > 0)
      issues.push(`prefix ${JSON.stringify(opts.prefix)}: ${pc.problems.map((p) => p.message).join(', ')}`);
    else prefix = pc.components;
  }
  entries.forEach((e, i) => issues.push(...entryIssues(e, i)));
  if (issues.length > 0)
    throw new ValidationError('ARCHIVE_WRITE_INVALID', 'cannot write these entries as a tar archive', issues);

  const p = pack();
  const at = (path: string): string => [...prefix, path].join('/');
  const add = (header: Header, parts?: readonly Buffer[]): Promise<void> =>
    new Promise((resolve, reject) => {
      const cb = (err?: Error | null): void => (err ? reject(err) : resolve());
      if (parts === undefined) {
        p.entry(header, cb); // no body: the pack closes the entry itself
        return;
      }
      if (parts.length === 0) {
        p.entry(header, Buffer.alloc(0), cb);
        return;
      }
      // Queued by reference; the pack hands them on as they are read.
      const sink = p.entry(header, cb);
      for (const part of parts.slice(0, -1)) sink.write(part);
      sink.end(parts.at(-1));
    });
  const produce = async (): Promise<void> => {
    for (let i = 1; i <= prefix.length; i++) {
      await add({
        ...FIXED,
        name: `${prefix.slice(0, i).join('/')}/`,
        type: 'directory',
        mode: 0o755,
        size: 0,
      } as Header);
    }
    for (const e of entries) await add(canonicalHeader(e, at), e.type === 'file' ? partsOf(e) : undefined);
    p.finalize();
  };
  const producing = produce().catch((err: unknown) => {
    p.destroy(err instanceof Error ? err : new Error(String(err)));
  });
  const checksums = new SevenDigitChecksums();
  try {
    for await (const piece of p) yield* checksums.push(piece as Buffer);
    await producing;
  } finally {
    p.destroy(); // a consumer that stopped early must not leave the producer waiting
  }
}

/** The canonical header of a validated entry (`at` places its path and a hardlink's target in the output). */
export function canonicalHeader(e: ArchiveEntry, at: (path: string) => string = (path) => path): Header {
  switch (e.type) {
    case 'directory':
      return { ...FIXED, name: `${at(e.path)}/`, type: 'directory', mode: 0o755, size: 0 } as Header;
    case 'file':
      return { ...FIXED, name: at(e.path), type: 'file', mode: normalizedMode('file', e.mode), size: e.size } as Header;
    case 'symlink':
      return { ...FIXED, name: at(e.path), type: 'symlink', linkname: e.linkname!, mode: 0o777, size: 0 } as Header;
    case 'hardlink':
      return {
        ...FIXED,
        name: at(e.path),
        type: 'link',
        linkname: at(e.linkname!),
        mode: normalizedMode('hardlink', e.mode),
        size: 0,
      } as Header;
  }
}

/** The canonical archive of `entries` in one buffer (see packArchive). */
export async function writeArchive(entries: ArchiveEntry[], opts: { prefix?: string } = {}): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for await (const piece of packArchive(entries, opts)) pieces.push(piece);
  return Buffer.concat(pieces);
}

/**
 * Rewrites every header's checksum as seven octal digits and a NUL ("0012345\0"), a form POSIX allows and
 * every tar reader (GNU tar, Go, Python, node-tar, tar-stream, Docker) accepts. Why: the PDS sniffs uploaded
 * blobs with `file-type`, which recognises a tar only by a six-digit checksum field and would otherwise
 * replace the blob's MIME type `application/<runtime-record-cid>` with `application/x-tar`, breaking the
 * at-run runtime binding.
 *
 * It follows the archive's framing across pieces of any size: header blocks are copied and rewritten, the
 * bytes between them (file contents, padding) pass through untouched, and so does everything from the first
 * zero block (the end marker) on.
 */
export class SevenDigitChecksums {
  #pos = 0;
  #nextHeader = 0;
  #partial: Buffer[] = [];
  #partialLength = 0;
  #ended = false;

  *push(piece: Buffer): Generator<Buffer> {
    let rest = piece;
    while (rest.length > 0) {
      if (this.#ended) {
        yield rest;
        return;
      }
      if (this.#pos < this.#nextHeader) {
        const n = Math.min(rest.length, this.#nextHeader - this.#pos);
        yield rest.subarray(0, n);
        this.#pos += n;
        rest = rest.subarray(n);
        continue;
      }
      const n = Math.min(rest.length, BLOCK - this.#partialLength);
      this.#partial.push(rest.subarray(0, n));
      this.#partialLength += n;
      rest = rest.subarray(n);
      if (this.#partialLength < BLOCK) return;
      const header = Buffer.concat(this.#partial, BLOCK); // a copy: the pack's buffers are never written to
      this.#partial = [];
      this.#partialLength = 0;
      this.#pos += BLOCK;
      if (header.every((b) => b === 0)) {
        this.#ended = true;
        yield header;
        continue;
      }
      header.fill(0x20, 148, 156);
      let sum = 0;
      for (const b of header) sum += b;
      header.write(`${sum.toString(8).padStart(7, '0')}\0`, 148, 'latin1');
      const size = parseInt(header.toString('latin1', 124, 136).replace(/[\0 ]+$/, ''), 8) || 0;
      this.#nextHeader = this.#pos + Math.ceil(size / BLOCK) * BLOCK;
      yield header;
    }
  }
}

/**
 * The entries below directory `dir`, relocated so `dir` becomes the root: `dir/` is removed from every path
 * and hardlink target and `dir` itself is dropped. Use it to materialize a code archive's single top-level
 * directory as the code root. Throws `ARCHIVE_WRITE_INVALID` when an entry or hardlink target lies outside
 * `dir` (a validated code archive has none). Symlink targets are relative and stay as written; validation
 * already required them to resolve inside `dir`.
 */
export function entriesUnder(entries: ArchiveEntry[], dir: string): ArchiveEntry[] {
  const pc = canonicalRelativePath(dir);
  if (pc.problems.length > 0)
    throw new ValidationError(
      'ARCHIVE_WRITE_INVALID',
      `cannot relocate under ${JSON.stringify(dir)}`,
      pc.problems.map((p) => p.message),
    );
  const prefix = `${pc.components.join('/')}/`;
  const issues: string[] = [];
  const out: ArchiveEntry[] = [];
  for (const e of entries) {
    if (e.path === prefix.slice(0, -1)) continue;
    if (!e.path.startsWith(prefix)) {
      issues.push(`${e.path} is outside ${prefix}`);
      continue;
    }
    const moved: ArchiveEntry = { ...e, path: e.path.slice(prefix.length) };
    if (e.type === 'hardlink') {
      if (!e.linkname?.startsWith(prefix)) issues.push(`hardlink ${e.path} points outside ${prefix}`);
      else moved.linkname = e.linkname.slice(prefix.length);
    }
    out.push(moved);
  }
  if (issues.length > 0) throw new ValidationError('ARCHIVE_WRITE_INVALID', `entries lie outside ${prefix}`, issues);
  return out;
}
