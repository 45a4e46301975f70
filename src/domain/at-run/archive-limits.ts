// Size and count limits for the tar archives at-run accepts (runtime exports, addition exports, code blobs).
// They live in the domain so the operator policy can carry them; `src/adapters/archive` re-exports them as
// part of its public API.

export interface ArchiveLimits {
  /** Bytes of the archive itself, as received (checked before parsing; nothing larger is parsed). */
  maxArchiveBytes: number;
  /** Entries of any type (files, directories, links). Parsing stops at the first entry over the limit. */
  maxEntries: number;
  /** Sum of the sizes of all regular files (hardlinks count 0: they add no data). */
  maxExpandedBytes: number;
  /** Size of any single regular file (including the logical size a sparse entry claims). */
  maxFileBytes: number;
}

/**
 * Defaults sized for a language runtime export (a Python or Node install is 50–150 MB and a few thousand
 * files). Validation holds the archive in memory (twice when given one buffer: a private copy is taken so the
 * bytes cannot change while they are checked; once when handed the chunks of a download), so the archive
 * limit is also a memory bound.
 */
export const DEFAULT_ARCHIVE_LIMITS: Readonly<ArchiveLimits> = Object.freeze({
  maxArchiveBytes: 256 * 1024 * 1024,
  maxEntries: 20_000,
  maxExpandedBytes: 256 * 1024 * 1024,
  maxFileBytes: 128 * 1024 * 1024,
});

export const ARCHIVE_LIMIT_KEYS = ['maxArchiveBytes', 'maxEntries', 'maxExpandedBytes', 'maxFileBytes'] as const;

/** Every problem with a limits object (each limit must be a positive safe integer). Empty when valid. */
export function archiveLimitsIssues(value: unknown, where = 'archive limits'): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${where} must be an object`];
  const issues: string[] = [];
  const v = value as Record<string, unknown>;
  for (const key of ARCHIVE_LIMIT_KEYS) {
    const n = v[key];
    if (!(typeof n === 'number' && Number.isSafeInteger(n) && n > 0))
      issues.push(`${where}.${key} must be a positive integer (got ${JSON.stringify(n)})`);
  }
  for (const key of Object.keys(v)) {
    if (!(ARCHIVE_LIMIT_KEYS as readonly string[]).includes(key)) issues.push(`${where}.${key} is not a known limit`);
  }
  return issues;
}
