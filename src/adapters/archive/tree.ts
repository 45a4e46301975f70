// The virtual tree: every entry seen so far, keyed by its normalized path relative to the extraction root.
// It answers the questions a per-entry lexical check cannot: is a parent a symlink (a write would go through
// it), does a path change type, does a hardlink name something real, and where does a symlink end up once
// every symlink on its way is followed.

export type NodeType = 'file' | 'directory' | 'symlink' | 'hardlink' | 'other';

export interface TreeNode {
  type: NodeType;
  /** False for directories that exist only because something below them does. */
  explicit: boolean;
  /** Symlink target as written (relative), for symlinks. */
  linkname?: string;
}

/** Linux follows at most 40 symlinks while resolving one path (MAXSYMLINKS). */
export const MAX_SYMLINK_HOPS = 40;
/** Upper bound on resolution work for the whole archive (each step is one path component). */
export const MAX_RESOLUTION_STEPS = 2_000_000;

export type Resolution =
  | { status: 'inside'; components: string[]; node: TreeNode | undefined }
  | { status: 'escape'; via: string }
  | { status: 'loop' }
  | { status: 'budget' };

export type ParentProblem = { kind: 'symlink' | 'not-directory'; at: string } | null;

export class VirtualTree {
  readonly nodes = new Map<string, TreeNode>();
  private steps = 0;
  /** What the changes since `mark()` replaced, newest last (for `rollback()`). */
  private journal: Array<[string, TreeNode | undefined]> | null = null;

  /** Starts recording changes so the next ones can be undone (only the changes since the last mark are kept). */
  mark(): void {
    this.journal = [];
  }

  /** Undoes every change since `mark()`. */
  rollback(): void {
    for (const [key, before] of (this.journal ?? []).reverse()) {
      if (before === undefined) this.nodes.delete(key);
      else this.nodes.set(key, before);
    }
    this.journal = [];
  }

  get(components: readonly string[]): TreeNode | undefined {
    return components.length === 0 ? { type: 'directory', explicit: true } : this.nodes.get(components.join('/'));
  }

  /**
   * Checks the parents of `components` as they exist now. Missing parents become implicit directories
   * (only when every parent is fine). Returns the first parent that is a symlink or not a directory.
   */
  ensureParents(components: readonly string[]): ParentProblem {
    for (let i = 1; i < components.length; i++) {
      const key = components.slice(0, i).join('/');
      const node = this.nodes.get(key);
      if (!node) continue;
      if (node.type === 'symlink') return { kind: 'symlink', at: key };
      if (node.type !== 'directory') return { kind: 'not-directory', at: key };
    }
    for (let i = 1; i < components.length; i++) {
      const key = components.slice(0, i).join('/');
      if (!this.nodes.has(key)) {
        this.journal?.push([key, undefined]);
        this.nodes.set(key, { type: 'directory', explicit: false });
      }
    }
    return null;
  }

  /** Sets the node (last one wins, as in extraction) and returns what was there before. */
  set(components: readonly string[], node: TreeNode): TreeNode | undefined {
    const key = components.join('/');
    const before = this.nodes.get(key);
    this.journal?.push([key, before]);
    this.nodes.set(key, node);
    return before;
  }

  /**
   * Resolves `target` (relative, as written in a symlink) starting in directory `from`, following every
   * symlink met on the way through the tree as it is now. `..` above the root, or an absolute target met
   * along the way, is an escape: the archive must be relocatable, so nothing above its root is known.
   * Components that do not exist are taken lexically (a later `..` still counts against the root).
   * `floor` raises the root: with 1, leaving the top-level directory is already an escape.
   */
  resolve(from: readonly string[], target: string, floor = 0): Resolution {
    const stack = [...from];
    if (target.startsWith('/')) return { status: 'escape', via: `absolute target ${target}` };
    const pending = target.split('/').reverse();
    let hops = 0;
    while (pending.length > 0) {
      const c = pending.pop()!;
      if (++this.steps > MAX_RESOLUTION_STEPS) return { status: 'budget' };
      if (c === '' || c === '.') continue;
      if (c === '..') {
        if (stack.length <= floor)
          return {
            status: 'escape',
            via: floor === 0 ? '".." above the root' : `".." above ${stack.slice(0, floor).join('/')}`,
          };
        stack.pop();
        continue;
      }
      stack.push(c);
      const node = this.nodes.get(stack.join('/'));
      if (node?.type === 'symlink') {
        if (++hops > MAX_SYMLINK_HOPS) return { status: 'loop' };
        const link = node.linkname ?? '';
        if (link.startsWith('/')) return { status: 'escape', via: `symlink ${stack.join('/')} -> ${link}` };
        stack.pop();
        const parts = link.split('/');
        for (let i = parts.length - 1; i >= 0; i--) pending.push(parts[i]!);
      }
    }
    return { status: 'inside', components: stack, node: this.get(stack) };
  }

  /** Top-level names in first-seen order. */
  topLevel(): string[] {
    const out = new Set<string>();
    for (const key of this.nodes.keys()) out.add(key.split('/', 1)[0]!);
    return [...out];
  }
}
