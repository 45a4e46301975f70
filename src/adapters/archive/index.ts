// Tar validation and re-serialization for at-run (runtime exports, addition exports, code blobs).
//
// validateArchive parses once (tar-stream), cross-checked by a strict header audit, into a virtual tree and
// reports EVERY violation with a reason code (codes.ts). writeArchive builds a fresh canonical tar from the
// validated entries: ship that, never the original bytes (parsers disagree about hostile archives).
// entriesUnder relocates a code archive's single top-level directory to the root before writing.
// validateArchiveChunks and packArchive are the same over an archive held as the chunks it was downloaded in,
// without assembling or copying it (a runtime export is ~100 MB).

import { ValidationError } from '../../domain/errors.ts';
import { validateArchive, validateArchiveChunks } from './validate.ts';
import type { ArchiveLimits, ArchiveReport, ArchiveViolation, ValidateOptions } from './types.ts';

export { DEFAULT_ARCHIVE_LIMITS } from '../../domain/at-run/archive-limits.ts';
export type { ArchiveLimits, ArchiveViolation, ArchiveEntry, ArchiveReport, ValidateOptions } from './types.ts';
export { ARCHIVE_VIOLATION_CODES, type ArchiveViolationCode } from './codes.ts';
export { validateArchive, validateArchiveChunks, normalizedMode } from './validate.ts';
export { writeArchive, packArchive, entriesUnder } from './write.ts';

function describe(v: ArchiveViolation): string {
  return `${v.code}${v.path !== undefined ? ` ${JSON.stringify(v.path.length > 200 ? `${v.path.slice(0, 200)}…` : v.path)}` : ''}: ${v.message}`;
}

/** The archive broke at least one rule; `violations` lists every one (also rendered in `issues`). */
export class ArchiveRejectedError extends ValidationError {
  readonly violations: ArchiveViolation[];
  constructor(violations: ArchiveViolation[]) {
    const codes = [...new Set(violations.map((v) => v.code))];
    super('ARCHIVE_REJECTED', `archive rejected: ${violations.length} violation${violations.length === 1 ? '' : 's'} (${codes.join(', ')})`, violations.map(describe), {
      violations,
    });
    this.violations = violations;
  }
}

/** validateArchive, throwing ArchiveRejectedError (listing every violation) unless the archive is ok. */
export async function assertValidArchive(bytes: Buffer, limits: ArchiveLimits, opts: ValidateOptions): Promise<ArchiveReport> {
  const report = await validateArchive(bytes, limits, opts);
  if (!report.ok) throw new ArchiveRejectedError(report.violations);
  return report;
}

/** validateArchiveChunks (the chunks are handed over, not copied), throwing ArchiveRejectedError unless ok. */
export async function assertValidArchiveChunks(chunks: readonly Buffer[], limits: ArchiveLimits, opts: ValidateOptions): Promise<ArchiveReport> {
  const report = await validateArchiveChunks(chunks, limits, opts);
  if (!report.ok) throw new ArchiveRejectedError(report.violations);
  return report;
}
