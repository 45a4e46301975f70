// Archive validation against a public corpus of malicious/malformed tars (test/fixtures/tars), our own
// crafted cases, and the re-serialization round trip. Expected verdicts are read from the corpus README at
// test time; the reason codes each file must produce are ours, listed below.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { extract } from 'tar-stream';
import { describe, expect, it } from 'vitest';
import {
  ARCHIVE_VIOLATION_CODES,
  ArchiveRejectedError,
  DEFAULT_ARCHIVE_LIMITS,
  assertValidArchive,
  assertValidArchiveChunks,
  entriesUnder,
  packArchive,
  validateArchive,
  validateArchiveChunks,
  validateArchiveStream,
  writeArchive,
  type ArchiveEntry,
  type ArchiveLimits,
  type ArchiveReport,
  type ValidateOptions,
} from '../../../src/adapters/archive/index.ts';
import { ValidationError } from '../../../src/domain/errors.ts';

const REPO_ROOT = resolve(import.meta.dirname, '../../..');
const TARS = join(REPO_ROOT, 'test', 'fixtures', 'tars');

// ---------------------------------------------------------------------------------------------------------
// A raw tar encoder for crafted cases (tar-stream's packer refuses to write most of them).

interface RawHeader {
  name: string | Buffer;
  type?: string;
  size?: number;
  mode?: number;
  linkname?: string;
  format?: 'posix' | 'gnu';
  prefix?: string;
  /** Raw bytes for the 12-byte size field (overrides `size` in the header, not the data). */
  sizeField?: string;
  uid?: number;
}

function octal(n: number, width: number): string {
  return `${n.toString(8).padStart(width - 1, '0')}\0`;
}

function rawHeader(h: RawHeader): Buffer {
  const b = Buffer.alloc(512);
  (typeof h.name === 'string' ? Buffer.from(h.name) : h.name).copy(b, 0, 0, 100);
  b.write(octal(h.mode ?? 0o644, 8), 100, 'latin1');
  b.write(octal(h.uid ?? 0, 8), 108, 'latin1');
  b.write(octal(0, 8), 116, 'latin1');
  b.write(h.sizeField ?? octal(h.size ?? 0, 12), 124, 'latin1');
  b.write(octal(1_700_000_000, 12), 136, 'latin1');
  b.write(h.type ?? '0', 156, 'latin1');
  if (h.linkname) b.write(h.linkname, 157, 100);
  if ((h.format ?? 'posix') === 'posix') b.write('ustar\u000000', 257, 'latin1');
  else b.write('ustar  \u0000', 257, 'latin1');
  if (h.prefix) b.write(h.prefix, 345, 155);
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return b;
}

const pad = (data: Buffer): Buffer => Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)]);

function file(name: string, content = 'hello\n', extra: Partial<RawHeader> = {}): Buffer {
  const data = Buffer.from(content);
  return Buffer.concat([rawHeader({ name, size: data.length, ...extra }), pad(data)]);
}
const dir = (name: string, extra: Partial<RawHeader> = {}): Buffer =>
  rawHeader({ name, type: '5', mode: 0o755, ...extra });
const symlink = (name: string, target: string): Buffer => rawHeader({ name, type: '2', linkname: target, mode: 0o777 });
const hardlink = (name: string, target: string): Buffer => rawHeader({ name, type: '1', linkname: target });

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len++;
  return `${len}${body}`;
}
function pax(records: Record<string, string>, type = 'x'): Buffer {
  const data = Buffer.from(
    Object.entries(records)
      .map(([k, v]) => paxRecord(k, v))
      .join(''),
  );
  return Buffer.concat([rawHeader({ name: 'PaxHeaders/x', type, size: data.length }), pad(data)]);
}
const END = Buffer.alloc(1024);
const tar = (...parts: Buffer[]): Buffer => Buffer.concat([...parts, END]);

const limits = (over: Partial<ArchiveLimits> = {}): ArchiveLimits => ({ ...DEFAULT_ARCHIVE_LIMITS, ...over });
const RUNTIME: ValidateOptions = { kind: 'runtime' };
const validate = (
  bytes: Buffer,
  opts: ValidateOptions = RUNTIME,
  l: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS,
): Promise<ArchiveReport> => validateArchive(bytes, l, opts);
const codesOf = (r: ArchiveReport): string[] => r.violations.map((v) => v.code);

function expectViolation(r: ArchiveReport, code: string, path?: string): void {
  expect(r.ok).toBe(false);
  expect(
    r.violations,
    `expected ${code}${path !== undefined ? ` at ${path}` : ''} in ${JSON.stringify(r.violations, null, 1)}`,
  ).toContainEqual(expect.objectContaining(path === undefined ? { code } : { code, path }));
}

// ---------------------------------------------------------------------------------------------------------
// The shared corpus.

type Verdict = 'accept' | 'reject';

/** Reads the expected verdict of every file from the corpus README's tables. */
function readmeVerdicts(): Map<string, { verdict: Verdict; text: string }> {
  const out = new Map<string, { verdict: Verdict; text: string }>();
  let folder: string | undefined;
  let header: string[] | undefined;
  for (const line of readFileSync(join(TARS, 'README.md'), 'utf8').split('\n')) {
    if (line.startsWith('## ')) {
      folder = /^## ([\w-]+)\/ /.exec(line)?.[1];
      header = undefined;
      continue;
    }
    if (!folder || !line.startsWith('|')) continue;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    if (cells[0] === 'file') {
      header = cells;
      continue;
    }
    if (!header || /^-+$/.test(cells[0] ?? '')) continue;
    expect(cells.length, `README row has as many cells as its header: ${line}`).toBe(header.length);
    const col = header.indexOf('expected');
    // reconstructed/ has no "expected" column: every file there encodes a published exploit PoC.
    const text = col === -1 ? 'REJECT (published exploit PoC)' : cells[col]!;
    let verdict: Verdict;
    if (/^REJECT/.test(text)) verdict = 'reject';
    else if (/^ACCEPT/.test(text) || /^parse correctly/.test(text)) verdict = 'accept';
    else throw new Error(`unmapped README verdict for ${folder}/${cells[0]}: ${text}`);
    out.set(`${folder}/${cells[0]}`, { verdict, text });
  }
  return out;
}

function corpusFiles(): string[] {
  const files: string[] = [];
  for (const d of readdirSync(TARS)) {
    if (d === 'oracles' || !statSync(join(TARS, d)).isDirectory()) continue;
    for (const f of readdirSync(join(TARS, d))) files.push(`${d}/${f}`);
  }
  return files.sort();
}

/** Files on which at least one reference parser (py data_filter, GNU tar, node-tar) errored or warned. */
function filesSomeParserComplainedAbout(): Set<string> {
  const out = new Set<string>();
  const py = JSON.parse(readFileSync(join(TARS, 'oracles/oracle-python311-gnutar134.json'), 'utf8')) as Record<
    string,
    { py: string; gnu: string }
  >;
  for (const [file, o] of Object.entries(py)) {
    if (/rejects|Error/.test(o.py) || !/^rc=0, \d+ entries$/.test(o.gnu)) out.add(file);
  }
  let current = '';
  for (const line of readFileSync(join(TARS, 'oracles/oracle-node-tar-7.5.23.txt'), 'utf8').split('\n')) {
    if (line && !line.startsWith(' ')) current = line.trim();
    else if (/^\s+warns: (?!-$)/.test(line) || /ERROR/.test(line) || /warn codes: (?!-$)/.test(line)) out.add(current);
  }
  return out;
}

/** Reason codes each corpus file must produce (`CODE` or `CODE@path`). Accepted files list none. */
const CORPUS_CODES: Record<string, string[]> = {
  'go-archive-tar/gnu-incremental.tar': ['UNSUPPORTED_TYPE@test2/', 'SPARSE_ENTRY@test2/sparse'],
  'go-archive-tar/gnu-multi-hdrs.tar': ['REPEATED_METADATA_HEADER@GNU2/GNU2/long-path-name'],
  'go-archive-tar/gnu-sparse-big.tar': ['SPARSE_ENTRY@gnu-sparse', 'FILE_TOO_LARGE@gnu-sparse'],
  'go-archive-tar/hdr-only.tar': [
    'FIFO_ENTRY@fifo',
    'DEVICE_ENTRY@null',
    'DEVICE_ENTRY@sda',
    'HEADER_ONLY_TYPE_WITH_SIZE@dir/',
  ],
  'go-archive-tar/issue10968.tar': ['UNKNOWN_FORMAT'],
  'go-archive-tar/issue11169.tar': ['BAD_CHECKSUM'],
  'go-archive-tar/neg-size.tar': ['UNKNOWN_FORMAT'],
  'go-archive-tar/pax-bad-hdr-file.tar': ['PAX_MALFORMED', 'PARSER_DIFFERENTIAL'],
  'go-archive-tar/pax-bad-hdr-large.tar.bz2': ['COMPRESSED_ARCHIVE'],
  'go-archive-tar/pax-global-records.tar': ['PAX_GLOBAL_HEADER'],
  'go-archive-tar/pax-multi-hdrs.tar': ['REPEATED_METADATA_HEADER', 'PARSER_DIFFERENTIAL'],
  'go-archive-tar/pax-nul-path.tar': ['NUL_IN_NAME'],
  'go-archive-tar/pax-pos-size-file.tar': ['PAX_SIZE_CONFLICT@foo'],
  'go-archive-tar/pax-sparse-big.tar': ['SPARSE_ENTRY', 'FILE_TOO_LARGE'],
  'go-archive-tar/xattrs.tar': ['PAX_XATTR@small.txt', 'PAX_XATTR@small2.txt'],
  'jwilk-path-traversal/absolute1.tar': ['ABSOLUTE_PATH@/tmp/moo'],
  'jwilk-path-traversal/absolute2.tar': ['ABSOLUTE_PATH@//tmp/moo'],
  'jwilk-path-traversal/dirsymlink.tar': ['SYMLINK_ESCAPE@tmp', 'PATH_THROUGH_SYMLINK@tmp/moo'],
  'jwilk-path-traversal/dirsymlink2a.tar': ['SYMLINK_ESCAPE@par', 'PATH_THROUGH_SYMLINK@par/moo'],
  'jwilk-path-traversal/dirsymlink2b.tar': ['PATH_THROUGH_SYMLINK@cur/par', 'SYMLINK_ESCAPE@cur/par'],
  'jwilk-path-traversal/relative0.tar': ['PATH_TRAVERSAL@../moo'],
  'jwilk-path-traversal/relative2.tar': ['PATH_TRAVERSAL@tmp/../../moo'],
  'jwilk-path-traversal/symlink.tar': ['SYMLINK_ESCAPE@moo', 'DUPLICATE_PATH_TYPE_CHANGE@moo'],
  'node-tar/bad-cksum.tar': ['BAD_CHECKSUM'],
  'node-tar/excessively-deep.tar': ['HEADER_TOO_LARGE', 'PATH_TOO_LONG'],
  'node-tar/links-invalid.tar': ['LINKNAME_ON_NON_LINK@hardlink-1', 'EMPTY_LINK_TARGET@hardlink-2'],
  'node-tar/next-file-has-long.tar': [],
  'node-tar/null-byte.tar': [],
  'node-tar/path-missing.tar': ['EMPTY_PATH'],
  'node-tar/trailing-slash-corner-case.tar': [],
  'reconstructed/rc-ghsa-vmf3-pax-size-desync.tar': ['MIXED_METADATA_HEADERS', 'PAX_SIZE_CONFLICT@longname.txt'],
  'reconstructed/rc-moby-hardlink-symlink-loopholes.tar': [
    'HARDLINK_ESCAPE@grab',
    'HARDLINK_ESCAPE@loophole-victim',
    'PARENT_NOT_DIRECTORY@loophole-victim/file',
    'SYMLINK_ESCAPE@dir/loophole',
    'PATH_THROUGH_SYMLINK@dir/loophole/newdir/newfile',
    'SYMLINK_ESCAPE@slash-dotdot',
  ],
  'reconstructed/rc-moby-symlink-two-hop-breakout.tar': [
    'PATH_THROUGH_SYMLINK@inner/go_up/escape',
    'SYMLINK_ESCAPE@inner/go_up/escape',
    'PATH_THROUGH_SYMLINK@inner/go_up/escape/newfile',
  ],
  'reconstructed/rc-nodetar-compressed-bomb-8MiB.tar.gz': ['COMPRESSED_ARCHIVE'],
  'reconstructed/rc-nodetar-cve-2021-32803-dir-then-symlink.tar': [
    'DUPLICATE_PATH_TYPE_CHANGE@x',
    'PATH_THROUGH_SYMLINK@x/ginkoid',
  ],
  'reconstructed/rc-nodetar-ghsa-83g3-symlink-chain-hardlink.tar': [
    'SYMLINK_ESCAPE@a/b/escape',
    'HARDLINK_ESCAPE@exploit',
  ],
  'reconstructed/rc-nodetar-ghsa-8qq5-link-escapes.tar': [
    'HARDLINK_ESCAPE@exploit_hard',
    'HARDLINK_ESCAPE@sub/exploit_sub',
    'SYMLINK_ESCAPE@exploit_sym',
    'SYMLINK_ESCAPE@secret.txt',
    'SYMLINK_ESCAPE@a/link',
    'BACKSLASH_IN_PATH@a/winrootdotslink',
    'BACKSLASH_IN_PATH@a/winrootdotsescapelink',
  ],
  'snyk-zip-slip/zip-slip-win.tar': ['BACKSLASH_IN_PATH'],
  'snyk-zip-slip/zip-slip.tar': ['PATH_TRAVERSAL'],
};

const verdicts = readmeVerdicts();
const files = corpusFiles();
const complained = filesSomeParserComplainedAbout();

describe('the shared tar corpus', () => {
  it('is the corpus the README documents: every file has a README verdict, an oracle row and our expectations', () => {
    expect(files.length).toBe(39);
    expect([...verdicts.keys()].sort()).toEqual(files);
    expect(Object.keys(CORPUS_CODES).sort()).toEqual(files);
    const py = JSON.parse(readFileSync(join(TARS, 'oracles/oracle-python311-gnutar134.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(Object.keys(py).sort()).toEqual(files);
    // Byte-for-byte what the README lists (jwilk files embed build-time mtimes and are rebuilt).
    const sums = new Map(
      [...readFileSync(join(TARS, 'README.md'), 'utf8').matchAll(/^([0-9a-f]{64}) {2}(\S+)$/gm)].map((m) => [
        m[2]!,
        m[1]!,
      ]),
    );
    for (const f of files.filter((f) => !f.startsWith('jwilk-'))) {
      expect(
        createHash('sha256')
          .update(readFileSync(join(TARS, f)))
          .digest('hex'),
        f,
      ).toBe(sums.get(f));
    }
  });

  it('every verdict we reason about is documented: accepted files are exactly the README ACCEPT/parse-correctly rows', () => {
    const accepted = [...verdicts]
      .filter(([, v]) => v.verdict === 'accept')
      .map(([f]) => f)
      .sort();
    expect(accepted).toEqual([
      'node-tar/next-file-has-long.tar',
      'node-tar/null-byte.tar',
      'node-tar/trailing-slash-corner-case.tar',
    ]);
  });

  describe.each(files)('%s', (f) => {
    const bytes = readFileSync(join(TARS, f));
    const expected = verdicts.get(f)!;

    it(`runtime archive: ${expected.verdict} with every expected reason code`, async () => {
      const r = await validate(bytes);
      expect(r.ok, JSON.stringify(r.violations, null, 1)).toBe(expected.verdict === 'accept');
      expect(r.violations.length === 0).toBe(r.ok);
      for (const spec of CORPUS_CODES[f]!) {
        const at = spec.indexOf('@');
        if (at === -1) expectViolation(r, spec);
        else expectViolation(r, spec.slice(0, at), spec.slice(at + 1));
      }
      for (const v of r.violations) expect(Object.keys(ARCHIVE_VIOLATION_CODES)).toContain(v.code);
      if (complained.has(f)) expect(r.ok, 'a reference parser errored or warned on this file').toBe(false);
    });

    it('code archive: rejected unless it is accepted AND has a single top-level directory', async () => {
      const r = await validate(bytes, { kind: 'code' });
      if (expected.verdict === 'reject') expect(r.ok).toBe(false);
      else if (r.topLevel.length === 1) expect(r.ok, JSON.stringify(r.violations)).toBe(true);
      else expectViolation(r, 'CODE_TOP_LEVEL');
    });
  });

  it('next-file-has-long.tar parses to the long names (then fails the single-top-level rule as code)', async () => {
    const bytes = readFileSync(join(TARS, 'node-tar/next-file-has-long.tar'));
    const r = await validate(bytes);
    const long = `170-byte-filename-${'c'.repeat(152)}`;
    expect(r.entries.map((e) => [e.path, e.type, e.linkname])).toEqual([
      [long, 'file', undefined],
      ['longlink', 'symlink', long],
    ]);
    expect(r.entries[0]!.data?.length).toBe(100);
    expectViolation(await validate(bytes, { kind: 'code' }), 'CODE_TOP_LEVEL');
  });

  it('null-byte.tar takes its names from the GNU LongLink headers', async () => {
    const r = await validate(readFileSync(join(TARS, 'node-tar/null-byte.tar')), {
      kind: 'code',
      entrypoint: 'this_is_a_really_long_tgz_file_with_a_lot_of_characters.tgz',
    });
    expect(r.ok, JSON.stringify(r.violations)).toBe(true);
    expect(r.topLevel).toEqual(['this_is_a_really_long_directory_name_with_a_lot_of_characters']);
    expect(r.entries.map((e) => e.path)).toEqual([
      'this_is_a_really_long_directory_name_with_a_lot_of_characters',
      'this_is_a_really_long_directory_name_with_a_lot_of_characters/this_is_a_really_long_tgz_file_with_a_lot_of_characters.tgz',
    ]);
  });

  it('trailing-slash-corner-case.tar: files whose truncated ustar name ends in "/" are files, not directories', async () => {
    const r = await validate(readFileSync(join(TARS, 'node-tar/trailing-slash-corner-case.tar')));
    expect(r.ok).toBe(true);
    expect(r.entries.map((e) => e.type)).toEqual(['directory', 'file', 'file']);
    expect(r.entries.slice(1).map((e) => e.data?.length)).toEqual([560, 560]);
  });

  it('the compressed bomb, decompressed by the test, is still bounded by the size limits', async () => {
    const inner = gunzipSync(readFileSync(join(TARS, 'reconstructed/rc-nodetar-compressed-bomb-8MiB.tar.gz')));
    expect(inner.length).toBeGreaterThan(8 * 1024 * 1024);
    const r = await validate(inner, RUNTIME, limits({ maxFileBytes: 1024 * 1024, maxExpandedBytes: 4 * 1024 * 1024 }));
    expectViolation(r, 'FILE_TOO_LARGE', 'bomb');
    expectViolation(r, 'EXPANDED_TOO_LARGE', 'bomb');
    expect(r.entries[0]!.data).toBeUndefined(); // the over-limit bytes are never copied out
    expectViolation(await validate(inner, RUNTIME, limits({ maxArchiveBytes: 1024 * 1024 })), 'ARCHIVE_TOO_LARGE');
  });

  it('the 1 MiB PAX path of pax-bad-hdr-large (bz2, refused as compressed) is refused uncompressed too', async () => {
    const bytes = tar(pax({ path: `${'a/'.repeat(512 * 1024)}x` }), file('short'));
    const r = await validate(bytes);
    expectViolation(r, 'HEADER_TOO_LARGE');
    expectViolation(r, 'PATH_TOO_LONG');
  });
});

// ---------------------------------------------------------------------------------------------------------
// Crafted cases.

describe('links and the virtual tree', () => {
  it('a chain of individually harmless symlinks that escapes is caught at the link that escapes', async () => {
    // a/b/l1 -> ..       (a)            inside
    // a/l2   -> b/l1/..  (a/b/l1 = a, .. = root)   inside
    // l3     -> a/l2/..  (a/l2 = root, .. = above the root)   ESCAPES, though lexically it is just "a"
    const r = await validate(
      tar(dir('a/'), dir('a/b/'), symlink('a/b/l1', '..'), symlink('a/l2', 'b/l1/..'), symlink('l3', 'a/l2/..')),
    );
    expect(r.violations).toEqual([expect.objectContaining({ code: 'SYMLINK_ESCAPE', path: 'l3' })]);
  });

  it('symlinks that stay inside, including through other symlinks, are accepted', async () => {
    const r = await validate(
      tar(
        dir('usr/'),
        dir('usr/lib/'),
        file('usr/lib/libx.so', 'x'),
        symlink('lib', 'usr/lib'),
        symlink('libx', 'lib/libx.so'),
        symlink('self', '.'),
        symlink('dangling', 'not/there'),
      ),
    );
    expect(r.ok, JSON.stringify(r.violations)).toBe(true);
  });

  it('a symlink that escapes only after a LATER entry turns a path into a symlink is caught (resolution uses the final tree)', async () => {
    const r = await validate(tar(symlink('a', 'b/..'), dir('c/'), symlink('b', '..')));
    expectViolation(r, 'SYMLINK_ESCAPE', 'a');
    expectViolation(r, 'SYMLINK_ESCAPE', 'b');
  });

  it('symlink loops are refused', async () => {
    const r = await validate(tar(symlink('a', 'b'), symlink('b', 'a'), symlink('c', 'c')));
    expectViolation(r, 'SYMLINK_LOOP', 'a');
    expectViolation(r, 'SYMLINK_LOOP', 'b');
    expectViolation(r, 'SYMLINK_LOOP', 'c');
  });

  it('absolute symlinks are refused: the archive must be relocatable', async () => {
    expectViolation(await validate(tar(symlink('python', '/usr/bin/python3'))), 'SYMLINK_ESCAPE', 'python');
  });

  it('hardlinks: out of the tree, not seen before, to a directory, through a symlink; a good one passes', async () => {
    const r = await validate(
      tar(
        file('f', 'data'),
        dir('d/'),
        symlink('s', 'd'),
        file('d/g', 'g'),
        hardlink('out', '../etc/passwd'),
        hardlink('abs', '/etc/passwd'),
        hardlink('early', 'later'),
        file('later', 'later'),
        hardlink('todir', 'd'),
        hardlink('via', 's/g'),
        hardlink('self', 'self'),
        hardlink('good', 'f'),
        hardlink('good2', 'good'),
      ),
    );
    expectViolation(r, 'HARDLINK_ESCAPE', 'out');
    expectViolation(r, 'HARDLINK_ESCAPE', 'abs');
    expectViolation(r, 'HARDLINK_TARGET_MISSING', 'early');
    expectViolation(r, 'HARDLINK_TARGET_NOT_FILE', 'todir');
    expectViolation(r, 'HARDLINK_ESCAPE', 'via');
    expectViolation(r, 'HARDLINK_TARGET_MISSING', 'self');
    expect(r.violations.filter((v) => v.path === 'good' || v.path === 'good2')).toEqual([]);
    expect(r.entries.find((e) => e.path === 'good2')).toMatchObject({ type: 'hardlink', linkname: 'good', size: 0 });
  });

  it('a path that changes type, or repeats, is refused', async () => {
    const r = await validate(
      tar(file('a'), dir('a/'), file('b'), file('b'), dir('c/'), dir('c/'), file('x/y'), file('x')),
    );
    expectViolation(r, 'DUPLICATE_PATH_TYPE_CHANGE', 'a/');
    expectViolation(r, 'DUPLICATE_PATH', 'b');
    expectViolation(r, 'DUPLICATE_PATH_TYPE_CHANGE', 'x');
    expect(r.violations.some((v) => v.path === 'c/')).toBe(false);
  });

  it('entries below a file are refused', async () => {
    expectViolation(await validate(tar(file('f'), file('f/g'))), 'PARENT_NOT_DIRECTORY', 'f/g');
  });
});

describe('entry types, modes and names', () => {
  it('setuid, setgid and sticky bits are refused; modes are normalized in the entries', async () => {
    const r = await validate(
      tar(
        file('suid', 'x', { mode: 0o4755 }),
        file('sgid', 'x', { mode: 0o2755 }),
        dir('tmp/', { mode: 0o1777 }),
        file('plain', 'x', { mode: 0o640 }),
        file('exe', 'x', { mode: 0o700 }),
      ),
    );
    expectViolation(r, 'SPECIAL_MODE_BITS', 'suid');
    expectViolation(r, 'SPECIAL_MODE_BITS', 'sgid');
    expectViolation(r, 'SPECIAL_MODE_BITS', 'tmp/');
    expect(r.violations.find((v) => v.path === 'suid')?.message).toMatch(/setuid/);
    expect(Object.fromEntries(r.entries.map((e) => [e.path, e.mode]))).toEqual({
      suid: 0o755,
      sgid: 0o755,
      tmp: 0o755,
      plain: 0o644,
      exe: 0o755,
    });
  });

  it('devices, FIFOs, contiguous files, GNU dumpdirs and unknown types are refused', async () => {
    const r = await validate(
      tar(
        rawHeader({ name: 'c', type: '3' }),
        rawHeader({ name: 'b', type: '4' }),
        rawHeader({ name: 'p', type: '6' }),
        file('k', 'x', { type: '7' }),
        file('z', 'x', { type: 'Z' }),
      ),
    );
    expectViolation(r, 'DEVICE_ENTRY', 'c');
    expectViolation(r, 'DEVICE_ENTRY', 'b');
    expectViolation(r, 'FIFO_ENTRY', 'p');
    expectViolation(r, 'UNSUPPORTED_TYPE', 'k');
    expectViolation(r, 'UNSUPPORTED_TYPE', 'z');
  });

  it('old GNU long names (type N) stop the parse: tar-stream reads them as metadata, Go as an entry', async () => {
    const r = await validate(tar(file('ok'), file('N', 'evil/name', { type: 'N' }), file('after')));
    expectViolation(r, 'UNSUPPORTED_TYPE', 'N');
    expect(r.entries.map((e) => e.path)).toEqual(['ok']);
  });

  it('names: NUL, control characters, backslashes, non-UTF-8, too long, too deep, trailing slash on a file', async () => {
    const r = await validate(
      tar(
        pax({ path: 'nul\u0000hidden' }),
        file('x1'),
        file('new\nline'),
        file('back\\slash'),
        file(Buffer.from([0x66, 0xff, 0xfe]).toString('latin1')),
        rawHeader({ name: Buffer.from([0x67, 0xc3, 0x28]) }),
        pax({ path: `${'a'.repeat(300)}/f` }),
        file('x2'),
        pax({ path: `${'d/'.repeat(200)}f` }),
        file('x3'),
        pax({ path: 'notadir/' }),
        file('x4'),
      ),
    );
    expectViolation(r, 'NUL_IN_NAME');
    expectViolation(r, 'CONTROL_CHAR_IN_NAME', 'new\nline');
    expectViolation(r, 'BACKSLASH_IN_PATH', 'back\\slash');
    expectViolation(r, 'NON_UTF8_NAME');
    expectViolation(r, 'PATH_COMPONENT_TOO_LONG');
    expectViolation(r, 'PATH_TOO_DEEP');
    expectViolation(r, 'TRAILING_SLASH_ON_NON_DIRECTORY', 'notadir/');
  });

  it('a PAX path with traversal overrides an innocent ustar name and is caught', async () => {
    const r = await validate(tar(pax({ path: '../../etc/cron.d/x' }), file('innocent')));
    expectViolation(r, 'PATH_TRAVERSAL', '../../etc/cron.d/x');
  });

  it('"./" spellings are normalized and the root entry is not an entry', async () => {
    const r = await validate(tar(dir('./'), dir('./bin/'), file('./bin//tool', '#!/bin/sh\n', { mode: 0o755 })));
    expect(r.ok).toBe(true);
    expect(r.entries.map((e) => e.path)).toEqual(['bin', 'bin/tool']);
    expectViolation(await validate(tar(file('./'))), 'ROOT_NOT_DIRECTORY');
  });

  it('an empty archive is refused', async () => {
    expectViolation(await validate(tar()), 'EMPTY_ARCHIVE');
    expectViolation(await validate(Buffer.alloc(0)), 'EMPTY_ARCHIVE');
  });
});

describe('framing and metadata', () => {
  it('data after the end-of-archive marker is refused and never parsed (tar-stream would read it)', async () => {
    const r = await validate(Buffer.concat([file('a'), END, file('smuggled'), END]));
    expectViolation(r, 'TRAILING_DATA');
    expect(r.entries.map((e) => e.path)).toEqual(['a']);
    const lone = await validate(Buffer.concat([file('a'), Buffer.alloc(512), file('smuggled'), END]));
    expectViolation(lone, 'TRAILING_DATA');
    expect(lone.entries.map((e) => e.path)).toEqual(['a']);
    expectViolation(await validate(Buffer.concat([file('a'), END, Buffer.from('x'.repeat(100))])), 'TRAILING_DATA');
    expect((await validate(Buffer.concat([file('a'), END, Buffer.alloc(9000)]))).ok).toBe(true); // GNU tar pads to 10 KiB
  });

  it('truncation: inside a header, inside data, and a missing end marker', async () => {
    const whole = tar(file('a', 'x'.repeat(1000)));
    expectViolation(await validate(whole.subarray(0, 700)), 'ARCHIVE_TRUNCATED');
    expectViolation(await validate(whole.subarray(0, 300)), 'ARCHIVE_TRUNCATED');
    expectViolation(await validate(file('a')), 'ARCHIVE_TRUNCATED');
  });

  it('numeric fields must be strict octal: "12x" would be 10 bytes to tar-stream (parseInt) and an error to Go', async () => {
    expectViolation(
      await validate(tar(rawHeader({ name: 'a', sizeField: '0000000012x\0' }), pad(Buffer.from('0123456789')))),
      'BAD_NUMERIC_FIELD',
    );
    const neg = rawHeader({ name: 'a' });
    const negative = Buffer.from(neg);
    negative[124] = 0xff; // base-256, negative
    negative.fill(0x20, 148, 156);
    let sum = 0;
    for (const b of negative) sum += b;
    negative.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    expectViolation(await validate(tar(negative)), 'BAD_NUMERIC_FIELD');
  });

  it('a corrupted checksum stops the parse; entries before it are still checked', async () => {
    const bad = file('b');
    bad[0] = 0x63; // rename to "c" without fixing the checksum
    const r = await validate(tar(file('/abs'), bad));
    expectViolation(r, 'ABSOLUTE_PATH', '/abs');
    expectViolation(r, 'BAD_CHECKSUM');
  });

  it('v7 headers (no ustar magic) are refused', async () => {
    const v7 = rawHeader({ name: 'a' });
    v7.fill(0, 257, 265);
    v7.fill(0x20, 148, 156);
    let sum = 0;
    for (const b of v7) sum += b;
    v7.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    expectViolation(await validate(tar(v7)), 'UNKNOWN_FORMAT');
  });

  it('an old-style regular file (typeflag NUL) named "x/" is a directory to Go and a file to tar-stream', async () => {
    const r = await validate(tar(rawHeader({ name: 'x/', type: '\0' })));
    expectViolation(r, 'PARSER_DIFFERENTIAL', 'x/');
  });

  it('PAX: size conflicts, unknown keys, xattrs, malformed records, dangling and mixed headers', async () => {
    expectViolation(await validate(tar(pax({ size: '5' }), file('a', 'abc'))), 'PAX_SIZE_CONFLICT', 'a');
    expectViolation(await validate(tar(pax({ size: 'ten' }), file('a', 'abc'))), 'PAX_MALFORMED', 'a');
    expectViolation(
      await validate(tar(pax({ 'SCHILY.xattr.security.capability': 'x' }), file('ping'))),
      'PAX_XATTR',
      'ping',
    );
    expectViolation(await validate(tar(pax({ hdrcharset: 'BINARY' }), file('a'))), 'PAX_UNSUPPORTED_KEY', 'a');
    const broken = Buffer.from('20 path=abc\n');
    expectViolation(
      await validate(tar(rawHeader({ name: 'P', type: 'x', size: broken.length }), pad(broken), file('a'))),
      'PAX_MALFORMED',
      'a',
    );
    expectViolation(await validate(tar(file('a'), pax({ path: 'b' }))), 'DANGLING_METADATA_HEADER');
    const longName = Buffer.from('long\0');
    const mixed = await validate(
      tar(
        pax({ path: 'p' }),
        rawHeader({ name: '././@LongLink', type: 'L', size: longName.length, format: 'gnu' }),
        pad(longName),
        file('a'),
      ),
    );
    expectViolation(mixed, 'MIXED_METADATA_HEADERS', 'p');
    expectViolation(await validate(tar(pax({ path: 'g' }, 'g'), file('a'))), 'PAX_GLOBAL_HEADER');
    // Harmless records are accepted (and dropped on rewrite).
    const ok = await validate(
      tar(
        pax({ path: 'named-by-pax', mtime: '1700000000.5', atime: '1700000000', 'SCHILY.nlink': '1', uname: 'me' }),
        file('a'),
      ),
    );
    expect(ok.ok, JSON.stringify(ok.violations)).toBe(true);
    expect(ok.entries.map((e) => e.path)).toEqual(['named-by-pax']);
  });

  it('gzip, bzip2, xz and zstd input is refused without decompressing', async () => {
    expectViolation(await validate(gzipSync(tar(file('a')))), 'COMPRESSED_ARCHIVE');
    for (const magic of [
      [0x42, 0x5a, 0x68, 0x39],
      [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00],
      [0x28, 0xb5, 0x2f, 0xfd],
    ]) {
      expectViolation(await validate(Buffer.concat([Buffer.from(magic), Buffer.alloc(1024)])), 'COMPRESSED_ARCHIVE');
    }
  });

  it('every violation is reported, not only the first', async () => {
    const r = await validate(
      tar(
        file('/etc/passwd'),
        file('../up'),
        file('suid', 'x', { mode: 0o4755 }),
        rawHeader({ name: 'null', type: '3' }),
        symlink('esc', '../..'),
        pax({ 'SCHILY.xattr.a': 'b' }),
        file('x'),
      ),
    );
    expect(new Set(codesOf(r))).toEqual(
      new Set(['ABSOLUTE_PATH', 'PATH_TRAVERSAL', 'SPECIAL_MODE_BITS', 'DEVICE_ENTRY', 'SYMLINK_ESCAPE', 'PAX_XATTR']),
    );
  });
});

describe('limits', () => {
  it('entry count, single file size, expanded size and archive size', async () => {
    const four = tar(file('a'), file('b'), file('c'), file('d'));
    const many = await validate(four, RUNTIME, limits({ maxEntries: 3 }));
    expectViolation(many, 'TOO_MANY_ENTRIES', 'd');
    expect(many.entries).toHaveLength(3);
    expect((await validate(four, RUNTIME, limits({ maxEntries: 4 }))).ok).toBe(true);

    const big = tar(file('big', 'x'.repeat(2000)), file('small', 'y'));
    expectViolation(await validate(big, RUNTIME, limits({ maxFileBytes: 1999 })), 'FILE_TOO_LARGE', 'big');
    expect((await validate(big, RUNTIME, limits({ maxFileBytes: 2000 }))).ok).toBe(true);
    const expanded = await validate(big, RUNTIME, limits({ maxExpandedBytes: 2000 }));
    expectViolation(expanded, 'EXPANDED_TOO_LARGE', 'small');
    expect(expanded.expandedBytes).toBe(2001);
    expectViolation(await validate(big, RUNTIME, limits({ maxArchiveBytes: big.length - 1 })), 'ARCHIVE_TOO_LARGE');
    expect((await validate(big, RUNTIME, limits({ maxArchiveBytes: big.length }))).ok).toBe(true);
  });

  it('rejects nonsensical limits and options loudly', async () => {
    await expect(validateArchive(tar(file('a')), limits({ maxEntries: 0 }), RUNTIME)).rejects.toMatchObject({
      code: 'ARCHIVE_OPTIONS_INVALID',
    });
    await expect(
      validateArchive(tar(file('a')), limits(), { kind: 'runtime', stripPrefix: '../x' }),
    ).rejects.toMatchObject({ code: 'ARCHIVE_OPTIONS_INVALID' });
    expect(Object.isFrozen(DEFAULT_ARCHIVE_LIMITS)).toBe(true);
  });
});

describe('stripPrefix (Docker getArchive output)', () => {
  const exported = (): Buffer =>
    tar(
      dir('export/'),
      dir('export/bin/'),
      file('export/bin/python3', '#!', { mode: 0o755 }),
      hardlink('export/bin/python3.12', 'export/bin/python3'),
      symlink('export/bin/python', 'python3'),
      dir('export/lib/'),
    );

  it('validates paths relative to the prefix and strips it from the entries', async () => {
    const r = await validate(exported(), { kind: 'runtime', stripPrefix: 'export' });
    expect(r.ok, JSON.stringify(r.violations)).toBe(true);
    expect(r.topLevel).toEqual(['bin', 'lib']);
    expect(r.entries.map((e) => [e.path, e.type, e.linkname])).toEqual([
      ['bin', 'directory', undefined],
      ['bin/python3', 'file', undefined],
      ['bin/python3.12', 'hardlink', 'bin/python3'],
      ['bin/python', 'symlink', 'python3'],
      ['lib', 'directory', undefined],
    ]);
  });

  it('a symlink that climbs out of the prefix escapes even though the parent exists in the container', async () => {
    const r = await validate(tar(dir('export/'), symlink('export/etc', '../etc')), {
      kind: 'runtime',
      stripPrefix: 'export',
    });
    expectViolation(r, 'SYMLINK_ESCAPE', 'export/etc');
  });

  it('entries and hardlink targets outside the prefix are refused; the prefix must be a directory', async () => {
    const r = await validate(
      tar(dir('export/'), file('other/file'), file('export/a'), hardlink('export/h', 'other/file')),
      { kind: 'runtime', stripPrefix: 'export' },
    );
    expectViolation(r, 'OUTSIDE_PREFIX', 'other/file');
    expectViolation(r, 'HARDLINK_ESCAPE', 'export/h');
    expectViolation(
      await validate(tar(symlink('export', '/')), { kind: 'runtime', stripPrefix: 'export' }),
      'ROOT_NOT_DIRECTORY',
      'export',
    );
  });
});

describe('code archives', () => {
  const app = (...extra: Buffer[]): Buffer =>
    tar(dir('app/'), dir('app/src/'), file('app/src/main.py', 'print(1)\n'), ...extra);
  const code = (entrypoint?: string): ValidateOptions => ({
    kind: 'code',
    ...(entrypoint !== undefined ? { entrypoint } : {}),
  });

  it('one top-level directory with the entrypoint as a regular file passes', async () => {
    const r = await validate(app(), code('src/main.py'));
    expect(r.ok, JSON.stringify(r.violations)).toBe(true);
    expect(r.topLevel).toEqual(['app']);
  });

  it('an entrypoint that is an internal symlink to a regular file passes', async () => {
    expect((await validate(app(symlink('app/main', 'src/main.py')), code('main'))).ok).toBe(true);
  });

  it('entrypoint missing, a directory, escaping through a symlink, a symlink to a directory', async () => {
    expectViolation(await validate(app(), code('src/nope.py')), 'ENTRYPOINT_MISSING');
    expectViolation(await validate(app(), code('src')), 'ENTRYPOINT_NOT_FILE');
    const escaping = await validate(app(symlink('app/run', '../../etc/passwd')), code('run'));
    expectViolation(escaping, 'ENTRYPOINT_ESCAPES');
    expectViolation(escaping, 'SYMLINK_ESCAPE', 'app/run');
    expectViolation(await validate(app(symlink('app/d', 'src')), code('d')), 'ENTRYPOINT_NOT_FILE');
  });

  it('entrypoints that are not safe canonical relative paths', async () => {
    for (const ep of [
      '../app/src/main.py',
      '/app/src/main.py',
      'src/./main.py',
      'src//main.py',
      '',
      'src/main.py/',
      'a\u0000b',
    ]) {
      expectViolation(await validate(app(), code(ep)), 'ENTRYPOINT_INVALID');
    }
  });

  it('symlinks must stay inside the code directory (it becomes /opt/at-run/app), not merely inside the archive', async () => {
    const r = await validate(app(symlink('app/sibling', '../app/src/main.py')), code('sibling'));
    expectViolation(r, 'SYMLINK_ESCAPE', 'app/sibling');
    expectViolation(r, 'ENTRYPOINT_ESCAPES');
    // The same link is fine in a runtime archive, whose root is the archive root.
    expect((await validate(app(symlink('app/sibling', '../app/src/main.py')))).ok).toBe(true);
  });

  it('entriesUnder relocates the top-level directory to the root for materialization', async () => {
    const report = await validate(
      app(symlink('app/main', 'src/main.py'), hardlink('app/copy.py', 'app/src/main.py')),
      code('main'),
    );
    expect(report.ok, JSON.stringify(report.violations)).toBe(true);
    const moved = entriesUnder(report.entries, report.topLevel[0]!);
    expect(moved.map((e) => [e.path, e.type, e.linkname])).toEqual([
      ['src', 'directory', undefined],
      ['src/main.py', 'file', undefined],
      ['main', 'symlink', 'src/main.py'],
      ['copy.py', 'hardlink', 'src/main.py'],
    ]);
    const again = await validate(await writeArchive(moved));
    expect(again.ok, JSON.stringify(again.violations)).toBe(true);
    expect(() => entriesUnder(report.entries, 'elsewhere')).toThrow(ValidationError);
  });

  it('two top-level directories, a top-level file, or nothing at all', async () => {
    expectViolation(await validate(tar(dir('a/'), file('a/x'), dir('b/'), file('b/y')), code('x')), 'CODE_TOP_LEVEL');
    expectViolation(await validate(tar(file('main.py')), code('main.py')), 'CODE_TOP_LEVEL');
    expectViolation(await validate(tar(dir('app/'), file('app/x'), file('README')), code('x')), 'CODE_TOP_LEVEL');
  });
});

describe('re-serialization', () => {
  const sample = (): Buffer =>
    tar(
      dir('rt/', { mode: 0o700 }),
      dir('rt/bin/'),
      file('rt/bin/node', '\u007fELF', { mode: 0o750, uid: 1234 }),
      symlink('rt/bin/nodejs', 'node'),
      hardlink('rt/bin/node-hard', 'rt/bin/node'),
      pax({ path: `rt/lib/${'long-'.repeat(40)}name.js` }),
      file('rt/lib/x', 'module.exports = 1\n', { mode: 0o600 }),
      pax({ path: 'rt/lib/ünïcödé.txt' }),
      file('rt/lib/y', 'unicode\n'),
      pax({ path: 'rt/lib/far', linkpath: `${'../'.repeat(1)}bin/${'n'.repeat(120)}` }),
      symlink('rt/lib/z', 'placeholder'),
      file('rt/empty', ''),
    );
  const strip = (entries: ArchiveEntry[]): unknown[] =>
    entries.map((e) => ({ ...e, data: e.data?.toString('base64') }));

  it('the rewritten archive re-validates ok with the same entries, and is not the original bytes', async () => {
    const original = sample();
    const first = await validate(original, { kind: 'code', entrypoint: 'bin/nodejs' });
    expect(first.ok, JSON.stringify(first.violations)).toBe(true);
    const rewritten = await writeArchive(first.entries);
    expect(rewritten.equals(original)).toBe(false);
    const second = await validate(rewritten, { kind: 'code', entrypoint: 'bin/nodejs' });
    expect(second.ok, JSON.stringify(second.violations)).toBe(true);
    expect(strip(second.entries)).toEqual(strip(first.entries));
    expect(second.expandedBytes).toBe(first.expandedBytes);
    // and it is a fixed point
    expect((await writeArchive(second.entries)).equals(rewritten)).toBe(true);
  });

  it('with a prefix, the archive re-validates under stripPrefix with the same entries', async () => {
    const first = await validate(sample());
    const rewritten = await writeArchive(first.entries, { prefix: 'out/export' });
    const second = await validate(rewritten, { kind: 'runtime', stripPrefix: 'out/export' });
    expect(second.ok, JSON.stringify(second.violations)).toBe(true);
    expect(strip(second.entries)).toEqual(strip(first.entries));
  });

  it(
    'headers are canonical: uid/gid 0, no user names, mtime 0, ' +
      'normalized modes, only types 0/5/2/1 and path/linkpath PAX records',
    async () => {
      const rewritten = await writeArchive((await validate(sample())).entries);
      const ex = extract();
      const seen: Array<{
        name: string;
        type: string;
        mode: number;
        uid: number;
        gid: number;
        uname: string;
        mtime: number;
        pax: unknown;
      }> = [];
      ex.on('entry', (h, stream, next) => {
        seen.push({
          name: h.name,
          type: h.type,
          mode: h.mode,
          uid: h.uid,
          gid: h.gid,
          uname: h.uname,
          mtime: h.mtime.getTime(),
          pax: h.pax,
        });
        stream.on('end', () => next());
        stream.resume();
      });
      await new Promise((res, rej) => {
        ex.on('finish', () => res(undefined));
        ex.on('error', rej);
        ex.end(rewritten);
      });
      expect(seen.length).toBeGreaterThan(5);
      for (const h of seen) {
        expect(['file', 'directory', 'symlink', 'link']).toContain(h.type);
        expect([h.uid, h.gid, h.mtime, h.uname]).toEqual([0, 0, 0, '']);
        expect([0o644, 0o755, 0o777]).toContain(h.mode);
        for (const key of Object.keys((h.pax as Record<string, string> | null) ?? {}))
          expect(['path', 'linkpath']).toContain(key);
      }
      expect(seen.find((h) => h.name === 'rt/bin/node')?.mode).toBe(0o755);
      expect(seen.find((h) => h.name.endsWith('name.js'))?.mode).toBe(0o644);
      expect(seen.find((h) => h.name === 'rt/lib/ünïcödé.txt')?.pax).toEqual({ path: 'rt/lib/ünïcödé.txt' });
    },
  );

  it('corpus files that pass also round-trip', async () => {
    for (const f of [
      'node-tar/null-byte.tar',
      'node-tar/trailing-slash-corner-case.tar',
      'node-tar/next-file-has-long.tar',
    ]) {
      const first = await validate(readFileSync(join(TARS, f)));
      const second = await validate(await writeArchive(first.entries));
      expect(second.ok, f).toBe(true);
      expect(strip(second.entries)).toEqual(strip(first.entries));
    }
  });

  it('refuses to write entries that would not validate', async () => {
    await expect(writeArchive([{ path: '/etc/passwd', type: 'file', mode: 0o644, size: 0 }])).rejects.toBeInstanceOf(
      ValidationError,
    );
    await expect(writeArchive([{ path: 'a/../b', type: 'directory', mode: 0o755, size: 0 }])).rejects.toMatchObject({
      code: 'ARCHIVE_WRITE_INVALID',
    });
    await expect(
      writeArchive([{ path: 'a', type: 'file', mode: 0o644, size: 3, data: Buffer.from('ab') }]),
    ).rejects.toMatchObject({ code: 'ARCHIVE_WRITE_INVALID' });
    await expect(
      writeArchive([{ path: 'a', type: 'symlink', mode: 0o777, size: 0, linkname: '/abs' }]),
    ).rejects.toMatchObject({ code: 'ARCHIVE_WRITE_INVALID' });
    await expect(writeArchive([], { prefix: '../x' })).rejects.toMatchObject({ code: 'ARCHIVE_WRITE_INVALID' });
  });
});

describe('assertValidArchive', () => {
  it('throws ArchiveRejectedError listing every violation', async () => {
    const bytes = tar(file('/abs'), file('../up'));
    const err = await assertValidArchive(bytes, DEFAULT_ARCHIVE_LIMITS, RUNTIME).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArchiveRejectedError);
    expect(err).toBeInstanceOf(ValidationError);
    const rejected = err as ArchiveRejectedError;
    expect(rejected.code).toBe('ARCHIVE_REJECTED');
    expect(rejected.violations.map((v) => v.code)).toEqual(['ABSOLUTE_PATH', 'PATH_TRAVERSAL']);
    expect(rejected.issues).toHaveLength(2);
    expect(rejected.message).toMatch(/ABSOLUTE_PATH/);
  });

  it('returns the report when the archive is ok', async () => {
    const report = await assertValidArchive(tar(dir('a/'), file('a/b')), DEFAULT_ARCHIVE_LIMITS, {
      kind: 'code',
      entrypoint: 'b',
    });
    expect(report.entries.map((e) => e.path)).toEqual(['a', 'a/b']);
  });

  it("validates a private copy: changing the caller's buffer during validation changes nothing", async () => {
    const bytes = tar(file('good'));
    const pending = validate(bytes);
    bytes.write('/etc', 0, 'latin1');
    const r = await pending;
    expect(r.ok).toBe(true);
    expect(r.entries[0]!.path).toBe('good');
  });
});

describe('mutated archives (seeded, deterministic)', () => {
  it('never throw, and whatever passes re-serializes into an archive that passes with the same entries', async () => {
    let seed = 20260818;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const bases = [
      ...files
        .filter((f) => !f.endsWith('.gz') && !f.endsWith('.bz2') && !f.includes('excessively'))
        .map((f) => readFileSync(join(TARS, f))),
      tar(
        dir('a/'),
        file('a/x', 'data'),
        symlink('a/l', 'x'),
        hardlink('a/h', 'a/x'),
        pax({ path: `a/${'p'.repeat(150)}` }),
        file('a/y'),
      ),
    ];
    let passed = 0;
    for (let i = 0; i < 400; i++) {
      const b = Buffer.from(bases[Math.floor(rnd() * bases.length)]!);
      for (let m = 1 + Math.floor(rnd() * 3); m > 0; m--) {
        const pos = Math.floor(rnd() * b.length);
        const block = pos - (pos % 512);
        b[pos] =
          rnd() < 0.5
            ? Math.floor(rnd() * 256)
            : [0x30, 0x31, 0x32, 0x35, 0x78, 0x4c, 0x67, 0x2f, 0x00][Math.floor(rnd() * 9)]!;
        if (rnd() < 0.6 && block + 512 <= b.length) {
          // re-seal the checksum so the mutation reaches the deeper checks
          b.fill(0x20, block + 148, block + 156);
          let sum = 0;
          for (let j = block; j < block + 512; j++) sum += b[j]!;
          b.write(`${sum.toString(8).padStart(6, '0')}\0 `, block + 148, 'latin1');
        }
      }
      const r = await validate(b, { kind: rnd() < 0.5 ? 'runtime' : 'code' });
      expect(r.ok).toBe(r.violations.length === 0);
      if (!r.ok) continue;
      passed++;
      const again = await validate(await writeArchive(r.entries));
      expect(again.ok, `mutation ${i}: ${JSON.stringify(again.violations)}`).toBe(true);
      expect(again.entries.map((e) => [e.path, e.type, e.linkname, e.size])).toEqual(
        r.entries.map((e) => [e.path, e.type, e.linkname, e.size]),
      );
    }
    expect(passed).toBeGreaterThan(0);
  });
});

// ---------------------------------------------------------------------------------------------------------
// The same validator over an archive held as the chunks it was downloaded in, and the streamed writer.

describe('chunked input (validateArchiveChunks) and streamed output (packArchive)', () => {
  /** Cuts `b` at seeded random points: 1-byte pieces, pieces ending mid-header, and large ones. */
  function cut(b: Buffer, seed: number): Buffer[] {
    let s = seed;
    const rnd = (): number => {
      s = (s * 1103515245 + 12345) & 0x7fffffff;
      return s / 0x7fffffff;
    };
    const out: Buffer[] = [];
    for (let off = 0; off < b.length;) {
      const r = rnd();
      const n = r < 0.2 ? 1 : r < 0.5 ? 1 + Math.floor(rnd() * 700) : 1 + Math.floor(rnd() * 5000);
      out.push(b.subarray(off, off + n));
      off += n;
    }
    return out;
  }
  /** A report with every kept file's bytes as one buffer, whichever way they were handed out. */
  const normalized = (r: ArchiveReport) => ({
    ...r,
    entries: r.entries.map(({ content, ...e }) => ({
      ...e,
      ...(content ? { data: Buffer.concat([...content]) } : {}),
    })),
  });
  const collect = async (pieces: AsyncIterable<Buffer>): Promise<Buffer> => {
    const out: Buffer[] = [];
    for await (const p of pieces) out.push(p);
    return Buffer.concat(out);
  };
  const crafted = [
    tar(
      dir('a/'),
      file('a/x', 'data'),
      symlink('a/l', 'x'),
      hardlink('a/h', 'a/x'),
      pax({ path: `a/${'p'.repeat(150)}` }),
      file('a/y', 'y'.repeat(3000)),
    ),
    Buffer.concat([tar(file('x', 'data')), Buffer.from('trailing')]),
    tar(file('x', 'data')).subarray(0, 700), // truncated inside the data
    tar(dir('app/'), file('app/main.py', 'print(1)\n'), symlink('app/up', '../../etc')),
  ];
  const inputs: Array<[string, Buffer]> = [
    ...files
      .filter((f) => !f.endsWith('.gz') && !f.endsWith('.bz2'))
      .map((f): [string, Buffer] => [f, readFileSync(join(TARS, f))]),
    ...crafted.map((b, i): [string, Buffer] => [`crafted ${i}`, b]),
  ];

  it.each(inputs)('%s: the same report from its chunks, however they are cut', async (_name, bytes) => {
    for (const [seed, opts] of [
      [1, { kind: 'runtime' }],
      [2, { kind: 'code', entrypoint: 'main.py' }],
      [3, { kind: 'runtime', stripPrefix: 'a' }],
    ] as const) {
      const expected = await validateArchive(bytes, DEFAULT_ARCHIVE_LIMITS, opts);
      const chunked = await validateArchiveChunks(cut(bytes, seed), DEFAULT_ARCHIVE_LIMITS, opts);
      expect(normalized(chunked)).toEqual(normalized(expected));
    }
  });

  it('the refusals before parsing are the same (too large, compressed, empty)', async () => {
    const small = { ...DEFAULT_ARCHIVE_LIMITS, maxArchiveBytes: 1000 };
    const big = tar(file('x', 'x'.repeat(2000)));
    expect((await validateArchiveChunks(cut(big, 4), small, { kind: 'runtime' })).violations).toEqual(
      (await validateArchive(big, small, { kind: 'runtime' })).violations,
    );
    const gz = gzipSync(tar(file('x')));
    expect(
      (await validateArchiveChunks([gz.subarray(0, 1), gz.subarray(1)], DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' }))
        .violations,
    ).toMatchObject([{ code: 'COMPRESSED_ARCHIVE' }]);
    expect((await validateArchiveChunks([], DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' })).violations).toMatchObject([
      { code: 'EMPTY_ARCHIVE' },
    ]);
    await expect(
      validateArchiveChunks('nope' as never, DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' }),
    ).rejects.toMatchObject({ code: 'ARCHIVE_OPTIONS_INVALID' });
    await expect(
      assertValidArchiveChunks([Buffer.from(tar(file('../x')))], DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' }),
    ).rejects.toBeInstanceOf(ArchiveRejectedError);
  });

  it('keeps file contents as views into the chunks it was handed (no copy)', async () => {
    const bytes = tar(dir('rt/'), file('rt/big', 'z'.repeat(20_000)));
    const chunks = cut(bytes, 5);
    const r = await validateArchiveChunks(chunks, DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' });
    const big = r.entries.find((e) => e.path === 'rt/big')!;
    expect(big.data).toBeUndefined();
    expect(big.content!.length).toBeGreaterThan(1);
    const owners = new Set(chunks.map((c) => c.buffer));
    for (const part of big.content!) expect(owners.has(part.buffer)).toBe(true);
  });

  it('packArchive yields exactly writeArchive’s bytes, from data or from content, with or without a prefix', async () => {
    const sampleTar = tar(
      dir('rt/'),
      file('rt/bin', '\u007fELF'.repeat(300), { mode: 0o750 }),
      symlink('rt/link', 'bin'),
      hardlink('rt/hard', 'rt/bin'),
      pax({ path: `rt/${'long-'.repeat(40)}name.js` }),
      file('rt/x', 'module.exports = 1\n'),
      pax({ path: 'rt/ünïcödé.txt' }),
      file('rt/y', ''),
    );
    const viaBuffer = await validateArchive(sampleTar, DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' });
    const viaChunks = await validateArchiveChunks(cut(sampleTar, 6), DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' });
    for (const opts of [{}, { prefix: 'out/export' }]) {
      const written = await writeArchive(viaBuffer.entries, opts);
      expect((await collect(packArchive(viaBuffer.entries, opts))).equals(written)).toBe(true);
      expect((await collect(packArchive(viaChunks.entries, opts))).equals(written)).toBe(true);
    }
    // Every header carries the seven-digit checksum the PDS's sniffer does not take for a tar (see write.ts).
    const out = await writeArchive(viaBuffer.entries);
    expect(out.toString('latin1', 148, 156)).toMatch(/^[0-7]{7}\0$/);
    const again = await validateArchive(out, DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' });
    expect(again.ok, JSON.stringify(again.violations)).toBe(true);
  });

  it('mutated archives (seeded): the chunked validator agrees with the buffer one on every verdict and entry', async () => {
    let seed = 777;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const bases = inputs.map(([, b]) => b).filter((b) => b.length < 200_000);
    for (let i = 0; i < 200; i++) {
      const b = Buffer.from(bases[Math.floor(rnd() * bases.length)]!);
      for (let m = 1 + Math.floor(rnd() * 3); m > 0; m--) {
        const pos = Math.floor(rnd() * b.length);
        const block = pos - (pos % 512);
        b[pos] = Math.floor(rnd() * 256);
        if (rnd() < 0.6 && block + 512 <= b.length) {
          b.fill(0x20, block + 148, block + 156);
          let sum = 0;
          for (let j = block; j < block + 512; j++) sum += b[j]!;
          b.write(`${sum.toString(8).padStart(6, '0')}\0 `, block + 148, 'latin1');
        }
      }
      const opts: ValidateOptions = rnd() < 0.5 ? { kind: 'runtime' } : { kind: 'code', entrypoint: 'x' };
      const expected = await validateArchive(b, DEFAULT_ARCHIVE_LIMITS, opts);
      expect(
        normalized(await validateArchiveChunks(cut(b, i + 1), DEFAULT_ARCHIVE_LIMITS, opts)),
        `mutation ${i}`,
      ).toEqual(normalized(expected));
    }
  });

  it('packArchive refuses invalid entries before yielding anything, and a consumer may stop early', async () => {
    const it1 = packArchive([{ path: 'a', type: 'file', mode: 0o644, size: 3, content: [Buffer.from('ab')] }]);
    await expect(it1.next()).rejects.toMatchObject({ code: 'ARCHIVE_WRITE_INVALID' });
    await expect(
      writeArchive([
        { path: 'a', type: 'file', mode: 0o644, size: 2, data: Buffer.from('ab'), content: [Buffer.from('ab')] },
      ]),
    ).rejects.toMatchObject({ code: 'ARCHIVE_WRITE_INVALID' });
    const many = Array.from({ length: 50 }, (_, i): ArchiveEntry => ({
      path: `f${i}`,
      type: 'file',
      mode: 0o644,
      size: 4096,
      content: [Buffer.alloc(4096, i)],
    }));
    let seen = 0;
    for await (const piece of packArchive(many)) {
      seen += piece.length;
      if (seen > 10_000) break; // the generator's cleanup must not leave its producer waiting
    }
    expect(seen).toBeGreaterThan(10_000);
  });

  // -------------------------------------------------------------------------------------------------------
  // The same validator over an archive as it arrives (validateArchiveStream), writing its output as it goes.

  /** The chunks one by one, sometimes letting the event loop turn between them (a download's pace). */
  async function* arriving(chunks: Buffer[]): AsyncGenerator<Buffer> {
    let n = 0;
    for (const c of chunks) {
      yield c;
      if (++n % 3 === 0) await new Promise((r) => setImmediate(r));
    }
  }
  const withoutData = (r: ArchiveReport) => ({ ...r, entries: r.entries.map(({ data: _d, content: _c, ...e }) => e) });
  async function streamed(
    chunks: Buffer[],
    limits: ArchiveLimits,
    opts: ValidateOptions,
  ): Promise<{ report: ArchiveReport; out: Buffer; error: unknown }> {
    const s = validateArchiveStream(arriving(chunks), limits, opts);
    const out: Buffer[] = [];
    let error: unknown;
    try {
      for await (const p of s.pieces) out.push(p);
    } catch (err) {
      error = err;
    }
    return { report: await s.report, out: Buffer.concat(out), error };
  }

  it.each(inputs)(
    '%s streamed: the same report, and the canonical archive out only when it passes',
    async (_name, bytes) => {
      for (const [seed, opts] of [
        [11, { kind: 'runtime' }],
        [12, { kind: 'code', entrypoint: 'main.py' }],
        [13, { kind: 'runtime', stripPrefix: 'a' }],
      ] as const) {
        const expected = await validateArchive(bytes, DEFAULT_ARCHIVE_LIMITS, opts);
        const got = await streamed(cut(bytes, seed), DEFAULT_ARCHIVE_LIMITS, opts);
        expect(withoutData(got.report)).toEqual(withoutData(expected));
        if (expected.ok) {
          expect(got.error).toBeUndefined();
          expect(got.out.equals(await writeArchive(expected.entries))).toBe(true);
        } else {
          // The output never ends: its reader gets the refusal instead of an end-of-archive marker.
          expect(got.error).toBeInstanceOf(ArchiveRejectedError);
        }
      }
    },
  );

  it('streamed, mutated archives (seeded): the same verdict and entries as the buffer validator', async () => {
    let seed = 4242;
    const rnd = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const bases = inputs.map(([, b]) => b).filter((b) => b.length < 200_000);
    for (let i = 0; i < 200; i++) {
      const b = Buffer.from(bases[Math.floor(rnd() * bases.length)]!);
      for (let m = 1 + Math.floor(rnd() * 3); m > 0; m--) {
        const pos = Math.floor(rnd() * b.length);
        const block = pos - (pos % 512);
        b[pos] = Math.floor(rnd() * 256);
        if (rnd() < 0.6 && block + 512 <= b.length) {
          b.fill(0x20, block + 148, block + 156);
          let sum = 0;
          for (let j = block; j < block + 512; j++) sum += b[j]!;
          b.write(`${sum.toString(8).padStart(6, '0')}\0 `, block + 148, 'latin1');
        }
      }
      const opts: ValidateOptions = rnd() < 0.5 ? { kind: 'runtime' } : { kind: 'code', entrypoint: 'x' };
      const expected = await validateArchive(b, DEFAULT_ARCHIVE_LIMITS, opts);
      const got = await streamed(cut(b, i + 7), DEFAULT_ARCHIVE_LIMITS, opts);
      expect(withoutData(got.report), `mutation ${i}`).toEqual(withoutData(expected));
      expect(got.error === undefined, `mutation ${i}`).toBe(expected.ok);
    }
  });

  it('streamed: an archive that fails only at the end (an escaping symlink) has already written entries, and then refuses', async () => {
    const bytes = tar(
      dir('rt/'),
      file('rt/a', 'a'.repeat(5000)),
      symlink('rt/up', '../../etc'),
      file('rt/b', 'b'.repeat(5000)),
    );
    const s = validateArchiveStream(arriving(cut(bytes, 21)), DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' });
    const out: Buffer[] = [];
    const error = await (async () => {
      for await (const p of s.pieces) out.push(p);
    })().catch((e: unknown) => e);
    expect(Buffer.concat(out).length).toBeGreaterThan(10_000); // rt/a and rt/b went out before the verdict
    expect(error).toBeInstanceOf(ArchiveRejectedError);
    const report = await s.report;
    expect(report.ok).toBe(false);
    expect(report.violations.map((v) => v.code)).toEqual(['SYMLINK_ESCAPE']);
  });

  it('streamed: the refusals before parsing, a failing source, and a consumer that stops early', async () => {
    const small = { ...DEFAULT_ARCHIVE_LIMITS, maxArchiveBytes: 1000 };
    expect(
      (await streamed(cut(tar(file('x', 'x'.repeat(2000))), 4), small, { kind: 'runtime' })).report.violations,
    ).toMatchObject([{ code: 'ARCHIVE_TOO_LARGE' }]);
    const gz = gzipSync(tar(file('x')));
    expect(
      (await streamed([gz.subarray(0, 1), gz.subarray(1)], DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' })).report
        .violations,
    ).toMatchObject([{ code: 'COMPRESSED_ARCHIVE' }]);
    expect((await streamed([], DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' })).report.violations).toMatchObject([
      { code: 'EMPTY_ARCHIVE' },
    ]);
    expect(() => validateArchiveStream(arriving([]), DEFAULT_ARCHIVE_LIMITS, { kind: 'nope' } as never)).toThrow(
      expect.objectContaining({ code: 'ARCHIVE_OPTIONS_INVALID' }),
    );

    const boom = new Error('connection reset');
    async function* failing(): AsyncGenerator<Buffer> {
      yield tar(file('x', 'x'.repeat(3000))).subarray(0, 2048);
      throw boom;
    }
    const f = validateArchiveStream(failing(), DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' });
    await expect(
      (async () => {
        for await (const _ of f.pieces) void _;
      })(),
    ).rejects.toBe(boom);
    await expect(f.report).rejects.toBe(boom);

    const big = tar(dir('rt/'), ...Array.from({ length: 40 }, (_, i) => file(`rt/f${i}`, String(i).repeat(20_000))));
    let read = false;
    async function* source(): AsyncGenerator<Buffer> {
      for (const c of cut(big, 9)) yield c;
      read = true;
    }
    const s = validateArchiveStream(source(), DEFAULT_ARCHIVE_LIMITS, { kind: 'runtime' });
    let got = 0;
    for await (const p of s.pieces) {
      got += p.length;
      if (got > 50_000) break;
    }
    await expect(s.report).rejects.toMatchObject({ code: 'ARCHIVE_STREAM_ABANDONED' });
    expect(read).toBe(false);
  });
});
