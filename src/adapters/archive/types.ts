// Public types of the archive adapter (re-exported by index.ts).

export type { ArchiveLimits } from '../../domain/at-run/archive-limits.ts';

export interface ArchiveViolation {
  /** One of ARCHIVE_VIOLATION_CODES (codes.ts). */
  code: string;
  /** The entry's name as written in the archive, when the violation concerns one entry. */
  path?: string;
  message: string;
}

/**
 * One validated entry. `path` is normalized and relative to the extraction root (after `stripPrefix`):
 * no leading `./`, no trailing `/`, never empty. `mode` is already normalized (directories and executables
 * 0755, other files 0644, symlinks 0777). `linkname` is the symlink target as written (relative), or the
 * hardlink target as a normalized root-relative path. A regular file's bytes are in `data` (one buffer), or
 * in `content` (consecutive parts, views into the chunks validateArchiveChunks was handed).
 */
export interface ArchiveEntry {
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'hardlink';
  mode: number;
  size: number;
  linkname?: string;
  data?: Buffer;
  content?: readonly Buffer[];
}

export interface ArchiveReport {
  ok: boolean;
  violations: ArchiveViolation[];
  entries: ArchiveEntry[];
  /** Sum of the sizes of all regular-file entries seen. */
  expandedBytes: number;
  /** First path components of the entries (after stripPrefix), in first-seen order. */
  topLevel: string[];
}

export interface ValidateOptions {
  /**
   * 'runtime': runtime and addition exports; the (stripped) archive root is the mount root.
   * 'code': exactly one top-level directory (after stripPrefix, when given), which becomes the code root:
   * symlinks must resolve inside it, and `entrypoint` is resolved in it.
   */
  kind: 'runtime' | 'code';
  /** Code archives: path of the entrypoint relative to the single top-level directory (ignored for 'runtime'). */
  entrypoint?: string;
  /**
   * Validate paths relative to this directory (Docker's getArchive of /x/export yields `export/...`):
   * entries outside it are violations, parent directories of it are skipped, and it is stripped from
   * entry paths and hardlink targets so the result is relocatable.
   */
  stripPrefix?: string;
}
