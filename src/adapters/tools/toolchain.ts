// The toolchain registry: one directory (under the runlog home) that both sandboxes see at /aura/all-tools.
//
// It is built from what THIS host has, for the names in TOOL_CATALOG, looked up in HOST_TOOL_PATH (a fixed
// list, not the supervisor's $PATH: shims like pyenv's must not decide what apps get). Every entry must run
// inside the sandbox, whose root is the Debian bookworm rootfs (PRoot --rootfs, and the app-base image is
// the same tree), so each tool becomes one of:
//   base     the rootfs has the tool itself (bash, sh, env, cat, ls, grep, sed, awk, find, tar, gzip):
//            a symlink to its in-sandbox path, e.g. bash → /usr/bin/bash
//   copy     an ELF binary whose shared libraries the rootfs all has (node, git, jq, docker — static):
//            a copy of the host binary (mtime kept; re-copied only when the host binary changes)
//   wrapped  an ELF binary needing libraries the rootfs lacks (curl → libcurl, libssl, …): the binary in
//            .bin/<name>, the missing libraries in .lib/<name>/, and a /bin/sh wrapper <name> that sets
//            LD_LIBRARY_PATH for that one process
// Anything else (missing on the host, a script such as an npm-installed `claude`, a non-ELF file) is listed
// in `unavailable` with the reason, and in `.toolchain.json`. Limits: git's helpers in /usr/lib/git-core
// (git-remote-https, …) are not mirrored, so `git clone https://…` does not work inside the sandbox.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  constants,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  closeSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  copyFileSync,
  utimesSync,
  chmodSync,
  readdirSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { TOOL_CATALOG } from '../../domain/manifest.ts';

const execFileP = promisify(execFile);

/** Where the toolchain directory is mounted inside both sandboxes. */
export const ALL_TOOLS_MOUNT = '/aura/all-tools';
/** Where an instance's allowlist directory is mounted inside both sandboxes. */
export const MY_TOOLS_MOUNT = '/aura/my-tools';
/** Host directories searched for tools, in order. */
export const HOST_TOOL_PATH: readonly string[] = [
  '/usr/local/bin',
  '/usr/bin',
  '/bin',
  '/usr/local/sbin',
  '/usr/sbin',
  '/sbin',
];
const ROOTFS_BIN_DIRS = ['usr/bin', 'bin', 'usr/sbin', 'sbin'];
const ROOTFS_LIB_DIRS = ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu', 'lib64', 'usr/lib64', 'lib', 'usr/lib'];
const INDEX_FILE = '.toolchain.json';

export type ToolKind = 'base' | 'copy' | 'wrapped';
export interface ToolEntry {
  name: string;
  kind: ToolKind;
  /** Host file it came from, or the in-rootfs path for 'base'. */
  source: string;
  /** Libraries copied for a 'wrapped' tool. */
  libs?: string[];
}
export interface Toolchain {
  dir: string;
  tools: ToolEntry[];
  unavailable: { name: string; reason: string }[];
}

export interface BuildToolchainOptions {
  /** The toolchain directory to fill (created if missing), e.g. <home>/toolchain. */
  dir: string;
  /** The Debian rootfs the sandboxes run on. */
  rootfs: string;
  candidates?: readonly string[];
  searchPath?: readonly string[];
}

const building = new Map<string, Promise<Toolchain>>();

/** Builds (or refreshes) the toolchain directory. Idempotent; concurrent calls for one dir share one build. */
export function buildToolchain(opts: BuildToolchainOptions): Promise<Toolchain> {
  const pending = building.get(opts.dir);
  if (pending) return pending;
  const p = build(opts).finally(() => building.delete(opts.dir));
  building.set(opts.dir, p);
  return p;
}

const built = new Map<string, Promise<Toolchain>>();

/** buildToolchain once per directory for this process (runners call it before their first spawn); retried after a failure. */
export function toolchainFor(opts: BuildToolchainOptions): Promise<Toolchain> {
  let p = built.get(opts.dir);
  if (!p) {
    p = buildToolchain(opts);
    built.set(opts.dir, p);
    p.catch(() => built.delete(opts.dir));
  }
  return p;
}

/** The names a built toolchain directory holds (its entries, without the hidden support files). */
export function toolchainNames(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((n) => !n.startsWith('.'))
      .sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
}

async function build(opts: BuildToolchainOptions): Promise<Toolchain> {
  const { dir, rootfs } = opts;
  if (!existsSync(join(rootfs, 'usr/bin'))) throw new Error(`no Debian rootfs at ${rootfs}: run 'npm run setup'`);
  mkdirSync(join(dir, '.bin'), { recursive: true });
  mkdirSync(join(dir, '.lib'), { recursive: true });
  const tools: ToolEntry[] = [];
  const unavailable: { name: string; reason: string }[] = [];
  const libIndex = rootfsLibraries(rootfs);

  for (const name of opts.candidates ?? TOOL_CATALOG) {
    const inRootfs = ROOTFS_BIN_DIRS.map((d) => `/${d}/${name}`).find((p) => lexists(join(rootfs, p)));
    if (inRootfs) {
      placeSymlink(join(dir, name), inRootfs);
      tools.push({ name, kind: 'base', source: inRootfs });
      continue;
    }
    const host = (opts.searchPath ?? HOST_TOOL_PATH).map((d) => join(d, name)).find((p) => isExecutableFile(p));
    if (!host) {
      unavailable.push({ name, reason: 'not installed on this host' });
      remove(join(dir, name));
      continue;
    }
    const real = realpathSync(host);
    if (!isElf(real)) {
      unavailable.push({
        name,
        reason: `${host} is not an ELF executable (scripts need their package tree, which is not mirrored)`,
      });
      remove(join(dir, name));
      continue;
    }
    const needed = await sharedLibraries(real);
    const missing = needed.filter((lib) => !libIndex.has(basename(lib.soname)));
    if (missing.length === 0) {
      syncCopy(real, join(dir, name));
      remove(join(dir, '.lib', name));
      tools.push({ name, kind: 'copy', source: real });
      continue;
    }
    const unresolved = missing.filter((l) => !l.path);
    if (unresolved.length > 0) {
      unavailable.push({
        name,
        reason: `libraries not found on the host: ${unresolved.map((l) => l.soname).join(', ')}`,
      });
      remove(join(dir, name));
      continue;
    }
    const libDir = join(dir, '.lib', name);
    mkdirSync(libDir, { recursive: true });
    for (const lib of missing) syncCopy(realpathSync(lib.path!), join(libDir, lib.soname));
    syncCopy(real, join(dir, '.bin', name));
    const wrapper =
      `#!/bin/sh\n# runlog toolchain: ${real} with the libraries the base rootfs lacks\n` +
      `LD_LIBRARY_PATH=${ALL_TOOLS_MOUNT}/.lib/${name}\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ` +
      `exec ${ALL_TOOLS_MOUNT}/.bin/${name} "$@"\n`;
    writeAtomic(join(dir, name), wrapper, 0o755);
    tools.push({ name, kind: 'wrapped', source: real, libs: missing.map((l) => l.soname) });
  }
  writeAtomic(join(dir, INDEX_FILE), JSON.stringify({ rootfs, tools, unavailable }, null, 2) + '\n', 0o644);
  return { dir, tools, unavailable };
}

function lexists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

function isExecutableFile(p: string): boolean {
  try {
    const s = statSync(p);
    return s.isFile() && (s.mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

function isElf(p: string): boolean {
  const fd = openSync(p, 'r');
  try {
    const b = Buffer.alloc(4);
    readSync(fd, b, 0, 4, 0);
    return b.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } finally {
    closeSync(fd);
  }
}

/** Sonames available in the rootfs's library directories. */
function rootfsLibraries(rootfs: string): Set<string> {
  const names = new Set<string>();
  for (const d of ROOTFS_LIB_DIRS) {
    try {
      for (const n of readdirSync(join(rootfs, d))) names.add(n);
    } catch {
      // a directory this rootfs does not have
    }
  }
  return names;
}

/** `ldd` of a host binary: [] for a static one. */
async function sharedLibraries(bin: string): Promise<{ soname: string; path: string | null }[]> {
  let out: string;
  try {
    out = (await execFileP('ldd', [bin], { env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' } })).stdout;
  } catch (e) {
    const text = String((e as { stdout?: string }).stdout ?? '') + String((e as { stderr?: string }).stderr ?? '');
    if (/not a dynamic executable|statically linked/.test(text)) return [];
    throw e;
  }
  const libs: { soname: string; path: string | null }[] = [];
  for (const line of out.split('\n')) {
    const m = /^\s*(\S+)\s+=>\s+(not found|\S+)/.exec(line);
    if (m) libs.push({ soname: m[1]!, path: m[2] === 'not found' ? null : m[2]! });
    else {
      const loader = /^\s*(\/\S+)\s+\(/.exec(line); // the dynamic loader: /lib64/ld-linux-x86-64.so.2
      if (loader) libs.push({ soname: basename(loader[1]!), path: loader[1]! });
    }
  }
  return libs;
}

function remove(p: string): void {
  rmSync(p, { recursive: true, force: true });
}

function placeSymlink(at: string, target: string): void {
  try {
    if (readlinkSync(at) === target) return;
  } catch {
    // missing, or not a symlink: replace below
  }
  const tmp = `${at}.tmp-${process.pid}`;
  remove(tmp);
  symlinkSync(target, tmp);
  renameSync(tmp, at);
}

/** Copies `src` to `dst` unless dst already has src's size and mtime; atomic (temp file + rename). */
function syncCopy(src: string, dst: string): void {
  const s = statSync(src);
  try {
    const d = lstatSync(dst);
    if (d.isFile() && d.size === s.size && Math.trunc(d.mtimeMs) === Math.trunc(s.mtimeMs)) return;
  } catch {
    // not there yet
  }
  const tmp = `${dst}.tmp-${process.pid}`;
  copyFileSync(src, tmp, constants.COPYFILE_FICLONE);
  chmodSync(tmp, 0o755);
  utimesSync(tmp, s.atime, s.mtime);
  renameSync(tmp, dst);
}

function writeAtomic(p: string, content: string, mode: number): void {
  const tmp = `${p}.tmp-${process.pid}`;
  writeFileSync(tmp, content, { mode });
  chmodSync(tmp, mode);
  renameSync(tmp, p);
}
