// The checks of a tar's entries: each one as it arrives, against the virtual tree of everything before it, and
// the finished tree as a whole.
//
// An extractor meets the entries in order, so each is checked the way it would meet it (names, parents,
// duplicates, links, modes, sizes) and kept, data included, for re-serialization; symlinks and a code archive's
// rules can only be judged once the tree is complete. Both validators (validate.ts over bytes held, stream.ts
// over a download) feed the same Checker, so their verdicts cannot drift apart. Every violation is reported.
import type { Header } from 'tar-stream';
import type { ArchiveLimits } from '../../domain/at-run/archive-limits.ts';
import { archiveMemberPath, canonicalRelativePath, type PathProblemKind } from '../../domain/at-run/safe-path.ts';
import { VirtualTree, type NodeType, type TreeNode } from './tree.ts';
import type { ArchiveViolationCode } from './codes.ts';
import type { ArchiveEntry, ArchiveViolation, ValidateOptions } from './types.ts';

const NAME_CODES: Record<PathProblemKind, ArchiveViolationCode> = {
  EMPTY: 'EMPTY_PATH',
  NUL: 'NUL_IN_NAME',
  CONTROL_CHAR: 'CONTROL_CHAR_IN_NAME',
  BACKSLASH: 'BACKSLASH_IN_PATH',
  ABSOLUTE: 'ABSOLUTE_PATH',
  NOT_ABSOLUTE: 'ABSOLUTE_PATH',
  TRAVERSAL: 'PATH_TRAVERSAL',
  TOO_LONG: 'PATH_TOO_LONG',
  COMPONENT_TOO_LONG: 'PATH_COMPONENT_TOO_LONG',
  TOO_DEEP: 'PATH_TOO_DEEP',
  NOT_CANONICAL: 'PATH_TRAVERSAL',
};

/** The permission bits a re-serialized entry gets: 0755 for directories and executables, else 0644. */
export function normalizedMode(type: ArchiveEntry['type'], mode: number): number {
  if (type === 'directory') return 0o755;
  if (type === 'symlink') return 0o777;
  return (mode & 0o111) !== 0 ? 0o755 : 0o644;
}

export type Retain = 'buffer' | 'parts';

export class Checker {
  readonly violations: ArchiveViolation[] = [];
  readonly entries: ArchiveEntry[] = [];
  readonly tree = new VirtualTree();
  /** Raw names of symlink nodes, for messages. */
  private readonly symlinkNames = new Map<string, string>();
  expandedBytes = 0;
  private reportedExpanded = false;
  count = 0;
  contentEntries = 0;

  constructor(
    private readonly limits: ArchiveLimits,
    private readonly opts: ValidateOptions,
    private readonly prefix: readonly string[],
    /** How a kept file's bytes are handed out: one buffer (`data`) or the parts as parsed (`content`). */
    private readonly retain: Retain,
  ) {}

  #saved: {
    violations: number;
    entries: number;
    expandedBytes: number;
    reportedExpanded: boolean;
    count: number;
    contentEntries: number;
    symlink: [string, string | undefined] | null;
  } | null = null;

  /**
   * Remembers the state before the next entry, so `rollback()` can take that entry back (a streamed entry is
   * checked when its header arrives; if its data never all arrives, it must count as never seen).
   */
  mark(): void {
    this.#saved = {
      violations: this.violations.length,
      entries: this.entries.length,
      expandedBytes: this.expandedBytes,
      reportedExpanded: this.reportedExpanded,
      count: this.count,
      contentEntries: this.contentEntries,
      symlink: null,
    };
    this.tree.mark();
  }

  rollback(): void {
    const s = this.#saved;
    if (!s) return;
    this.violations.length = s.violations;
    this.entries.length = s.entries;
    this.expandedBytes = s.expandedBytes;
    this.reportedExpanded = s.reportedExpanded;
    this.count = s.count;
    this.contentEntries = s.contentEntries;
    if (s.symlink) {
      const [key, raw] = s.symlink;
      if (raw === undefined) this.symlinkNames.delete(key);
      else this.symlinkNames.set(key, raw);
    }
    this.tree.rollback();
    this.#saved = null;
  }

  add(code: ArchiveViolationCode, message: string, path?: string): void {
    this.violations.push({ code, message, ...(path !== undefined ? { path } : {}) });
  }

  /** Whether tar-stream should hand us this entry's bytes (only regular files within the limits). */
  wantsData(h: Header): boolean {
    return (
      (h.type === 'file' || h.type === 'contiguous-file') &&
      h.size <= this.limits.maxFileBytes &&
      this.expandedBytes + h.size <= this.limits.maxExpandedBytes
    );
  }

  /** Where `components` sit relative to the stripPrefix directory. */
  private placement(components: string[]): { inside: string[] } | { ancestor: true } | { outside: true } {
    const n = this.prefix.length;
    if (n === 0) return { inside: components };
    if (components.length >= n && this.prefix.every((c, i) => components[i] === c))
      return { inside: components.slice(n) };
    if (components.length < n && components.every((c, i) => this.prefix[i] === c)) return { ancestor: true };
    return { outside: true };
  }

  /** Strips the prefix; returns null (after reporting) when the entry is outside it or is one of its parents. */
  private relative(components: string[], raw: string, type: NodeType): string[] | null {
    const place = this.placement(components);
    if ('inside' in place) return place.inside;
    if ('ancestor' in place && type === 'directory') return null;
    this.add('OUTSIDE_PREFIX', `entry is not inside ${this.prefix.join('/')}/`, raw);
    return null;
  }

  /** Lexical checks of a link target; reports problems with `absCode` for absolute targets and `..`. */
  private linkTargetOk(target: string, raw: string, isHardlink: boolean): boolean {
    if (target === '') {
      this.add('EMPTY_LINK_TARGET', `${isHardlink ? 'hardlink' : 'symlink'} has an empty target`, raw);
      return false;
    }
    let ok = true;
    for (const p of archiveMemberPath(target).problems) {
      if (p.kind === 'ABSOLUTE') {
        this.add(
          isHardlink ? 'HARDLINK_ESCAPE' : 'SYMLINK_ESCAPE',
          `target ${JSON.stringify(target)} is absolute (the archive must be relocatable)`,
          raw,
        );
      } else if (p.kind === 'TRAVERSAL') {
        if (!isHardlink) continue; // a symlink may use "..": resolution through the tree decides
        this.add('HARDLINK_ESCAPE', `hardlink target ${JSON.stringify(target)} contains ".."`, raw);
      } else {
        this.add(NAME_CODES[p.kind], `link target ${p.message}`, raw);
      }
      ok = false;
    }
    return ok;
  }

  onEntry(h: Header, parts: Buffer[] | undefined): void {
    const raw = h.name;
    const tsType = (h.type as string | null) ?? null;
    const type: NodeType =
      tsType === 'file'
        ? 'file'
        : tsType === 'directory'
          ? 'directory'
          : tsType === 'symlink'
            ? 'symlink'
            : tsType === 'link'
              ? 'hardlink'
              : 'other';
    const size = h.size;

    if (tsType === 'file' || tsType === 'contiguous-file') {
      if (size > this.limits.maxFileBytes)
        this.add('FILE_TOO_LARGE', `${size} bytes (limit ${this.limits.maxFileBytes})`, raw);
      this.expandedBytes += size;
      if (this.expandedBytes > this.limits.maxExpandedBytes && !this.reportedExpanded) {
        this.reportedExpanded = true;
        this.add(
          'EXPANDED_TOO_LARGE',
          `regular files add up to more than ${this.limits.maxExpandedBytes} bytes (reached at this entry)`,
          raw,
        );
      }
    }
    const special = h.mode & 0o7000;
    if (special !== 0) {
      const bits = [
        special & 0o4000 ? 'setuid' : '',
        special & 0o2000 ? 'setgid' : '',
        special & 0o1000 ? 'sticky' : '',
      ].filter(Boolean);
      this.add(
        'SPECIAL_MODE_BITS',
        `mode ${(h.mode & 0o7777).toString(8).padStart(4, '0')} has ${bits.join(', ')}`,
        raw,
      );
    }
    if ((type === 'file' || type === 'directory') && h.linkname)
      this.add('LINKNAME_ON_NON_LINK', `a ${type} carries the link target ${JSON.stringify(h.linkname)}`, raw);

    const pc = archiveMemberPath(raw);
    if (pc.problems.length > 0) {
      for (const p of pc.problems) this.add(NAME_CODES[p.kind], `name ${p.message}`, raw);
      this.contentEntries++;
      return;
    }
    if (pc.trailingSlash && type !== 'directory')
      this.add('TRAILING_SLASH_ON_NON_DIRECTORY', `a ${tsType ?? 'special'} entry whose name ends in "/"`, raw);
    const components = this.relative(pc.components, raw, type);
    if (components === null) return;
    if (components.length === 0) {
      if (type !== 'directory')
        this.add('ROOT_NOT_DIRECTORY', `the root entry is a ${tsType ?? 'special entry'}, not a directory`, raw);
      return;
    }
    this.contentEntries++;
    const key = components.join('/');

    const parent = this.tree.ensureParents(components);
    if (parent) {
      if (parent.kind === 'symlink')
        this.add('PATH_THROUGH_SYMLINK', `parent ${parent.at} is a symlink: extraction would write through it`, raw);
      else this.add('PARENT_NOT_DIRECTORY', `parent ${parent.at} is not a directory`, raw);
    }

    // Hardlink targets are checked against the tree as it is *before* this entry.
    let hardlinkTarget: string | undefined;
    if (type === 'hardlink') hardlinkTarget = this.checkHardlink(h.linkname ?? '', raw, key);
    let symlinkOk = false;
    if (type === 'symlink') symlinkOk = this.linkTargetOk(h.linkname ?? '', raw, false);

    const node: TreeNode = { type, explicit: true, ...(type === 'symlink' ? { linkname: h.linkname ?? '' } : {}) };
    const before = this.tree.set(components, node);
    if (before) {
      if (before.type === 'directory' && type === 'directory') {
        // Repeating a directory is harmless.
      } else if (before.type !== type) {
        this.add(
          'DUPLICATE_PATH_TYPE_CHANGE',
          `path was a ${before.explicit ? before.type : 'directory (implied by earlier entries)'} and is now a ${type}`,
          raw,
        );
      } else {
        this.add('DUPLICATE_PATH', `a second ${type} at the same path`, raw);
      }
    }
    if (type === 'symlink') {
      if (this.#saved && !this.#saved.symlink) this.#saved.symlink = [key, this.symlinkNames.get(key)];
      if (symlinkOk) this.symlinkNames.set(key, raw);
      else this.symlinkNames.delete(key);
    }

    if (type === 'other') return; // already reported by the header audit (device, FIFO, unsupported type)
    const entry: ArchiveEntry = {
      path: key,
      type,
      mode: normalizedMode(type, h.mode),
      size: type === 'file' ? size : 0,
    };
    if (type === 'symlink' || type === 'hardlink')
      entry.linkname = type === 'symlink' ? (h.linkname ?? '') : (hardlinkTarget ?? h.linkname ?? '');
    if (type === 'file' && parts) {
      if (this.retain === 'parts') entry.content = parts;
      else entry.data = parts.length === 1 ? parts[0]! : Buffer.concat(parts); // one part is a view into our private copy
    }
    this.entries.push(entry);
  }

  /** Returns the normalized root-relative target when it is fine. */
  private checkHardlink(target: string, raw: string, self: string): string | undefined {
    if (!this.linkTargetOk(target, raw, true)) return undefined;
    const place = this.placement(archiveMemberPath(target).components);
    const components = 'inside' in place ? place.inside : null;
    if (components === null) {
      this.add('HARDLINK_ESCAPE', `hardlink target ${JSON.stringify(target)} is outside the extraction root`, raw);
      return undefined;
    }
    if (components.length === 0) {
      this.add('HARDLINK_TARGET_NOT_FILE', 'hardlink to the root directory', raw);
      return undefined;
    }
    for (let i = 1; i < components.length; i++) {
      const at = components.slice(0, i).join('/');
      const node = this.tree.nodes.get(at);
      if (node?.type === 'symlink') {
        this.add('HARDLINK_ESCAPE', `hardlink target ${JSON.stringify(target)} passes through symlink ${at}`, raw);
        return undefined;
      }
      if (!node || node.type !== 'directory') {
        this.add(
          'HARDLINK_TARGET_MISSING',
          `hardlink target ${JSON.stringify(target)}: ${at} is not a directory seen earlier`,
          raw,
        );
        return undefined;
      }
    }
    const key = components.join('/');
    const node = this.tree.nodes.get(key);
    if (!node || key === self) {
      this.add(
        'HARDLINK_TARGET_MISSING',
        `hardlink target ${JSON.stringify(target)} is not an earlier entry of the archive`,
        raw,
      );
      return undefined;
    }
    if (node.type !== 'file' && node.type !== 'hardlink') {
      this.add(
        'HARDLINK_TARGET_NOT_FILE',
        `hardlink target ${JSON.stringify(target)} is a ${node.type}, not a regular file`,
        raw,
      );
      return undefined;
    }
    return key;
  }

  /** Whole-tree checks once every entry is in: symlink resolution, emptiness, code-archive rules. */
  finish(): string[] {
    const topLevel = this.tree.topLevel();
    // A code archive's single top-level directory becomes the code root (/opt/at-run/app): its symlinks
    // must stay inside that directory, not merely inside the archive.
    const codeRoot = this.opts.kind === 'code' ? this.codeRoot(topLevel) : undefined;
    const floor = codeRoot === undefined ? 0 : 1;
    let budgetReported = false;
    for (const [key, raw] of this.symlinkNames) {
      const node = this.tree.nodes.get(key);
      if (!node || node.type !== 'symlink') continue;
      // Resolve from where the link really lives: its parent directory, itself resolved through the tree.
      const parent = key.split('/').slice(0, -1);
      const dir =
        parent.length === 0
          ? { status: 'inside' as const, components: [] }
          : this.tree.resolve([], parent.join('/'), floor);
      const res = dir.status === 'inside' ? this.tree.resolve(dir.components, node.linkname ?? '', floor) : dir;
      const where = floor === 0 ? 'the root' : `the code directory ${codeRoot}/`;
      if (res.status === 'escape')
        this.add(
          'SYMLINK_ESCAPE',
          `symlink -> ${JSON.stringify(node.linkname)} resolves outside ${where} (${res.via})`,
          raw,
        );
      else if (res.status === 'loop')
        this.add('SYMLINK_LOOP', `symlink -> ${JSON.stringify(node.linkname)} does not resolve within 40 hops`, raw);
      else if (res.status === 'budget' && !budgetReported) {
        budgetReported = true;
        this.add('LINK_RESOLUTION_BUDGET', 'resolving the symlinks took too many steps; the archive is refused', raw);
      }
    }
    if (this.contentEntries === 0 && this.violations.length === 0)
      this.add('EMPTY_ARCHIVE', 'the archive holds no entries');
    if (this.opts.kind === 'code') this.checkEntrypoint(codeRoot);
    return topLevel;
  }

  /** The single top-level directory of a code archive, or undefined (after reporting CODE_TOP_LEVEL). */
  private codeRoot(topLevel: string[]): string | undefined {
    const top = topLevel[0];
    const topNode = top === undefined ? undefined : this.tree.nodes.get(top);
    if (topLevel.length !== 1 || top === undefined) {
      this.add(
        'CODE_TOP_LEVEL',
        `a code archive needs exactly one top-level directory; found ${topLevel.length}` +
          `${topLevel.length ? `: ${topLevel.slice(0, 10).join(', ')}` : ''}`,
      );
      return undefined;
    }
    if (topNode?.type !== 'directory') {
      this.add(
        'CODE_TOP_LEVEL',
        `the single top-level entry ${top} is a ${topNode?.type ?? 'missing entry'}, not a directory`,
        top,
      );
      return undefined;
    }
    return top;
  }

  private checkEntrypoint(root: string | undefined): void {
    const ep = this.opts.entrypoint;
    if (ep === undefined) return;
    const problems = canonicalRelativePath(ep).problems;
    if (problems.length > 0) {
      for (const p of problems) this.add('ENTRYPOINT_INVALID', `entrypoint ${JSON.stringify(ep)} ${p.message}`, ep);
      return;
    }
    if (root === undefined) return; // no directory to resolve it in; CODE_TOP_LEVEL says why
    const res = this.tree.resolve([root], ep, 1);
    if (res.status === 'escape')
      this.add('ENTRYPOINT_ESCAPES', `entrypoint ${ep} resolves outside ${root}/ (${res.via})`, ep);
    else if (res.status !== 'inside')
      this.add(
        'ENTRYPOINT_MISSING',
        `entrypoint ${ep} does not resolve (${res.status === 'loop' ? 'symlink loop' : 'too many steps'})`,
        ep,
      );
    else if (!res.node)
      this.add(
        'ENTRYPOINT_MISSING',
        `entrypoint ${ep} is not in the archive (looked for ${root}/${ep}` +
          `${res.components.join('/') !== `${root}/${ep}` ? `, resolved to ${res.components.join('/')}` : ''})`,
        ep,
      );
    else if (res.node.type !== 'file' && res.node.type !== 'hardlink')
      this.add('ENTRYPOINT_NOT_FILE', `entrypoint ${ep} is a ${res.node.type}, not a regular file`, ep);
  }
}
