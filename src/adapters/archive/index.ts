// Tar validation and re-serialization for at-run (runtime exports, addition exports, code blobs).
//
// validateArchive parses once (tar-stream), cross-checked by a strict header audit, into a virtual tree and
// reports EVERY violation with a reason code (codes.ts). writeArchive builds a fresh canonical tar from the
// validated entries: ship that, never the original bytes (parsers disagree about hostile archives).
// entriesUnder relocates a code archive's single top-level directory to the root before writing.
// validateArchiveChunks and packArchive are the same over an archive held as the chunks it was downloaded in,
// without assembling or copying it (a runtime export is ~100 MB).

import { ArchiveRejectedError } from './errors.ts';
import { validateArchive, validateArchiveChunks } from './validate.ts';
import type { ArchiveLimits, ArchiveReport, ValidateOptions } from './types.ts';

export { DEFAULT_ARCHIVE_LIMITS } from '../../domain/at-run/archive-limits.ts';
export type { ArchiveLimits, ArchiveViolation, ArchiveEntry, ArchiveReport, ValidateOptions } from './types.ts';
export { ARCHIVE_VIOLATION_CODES, type ArchiveViolationCode } from './codes.ts';
export { validateArchive, validateArchiveChunks } from './validate.ts';
export { normalizedMode } from './entry-checker.ts';
export { writeArchive, packArchive, entriesUnder } from './write.ts';
export { packCodeDirectory } from './pack-directory.ts';
export { ArchiveRejectedError } from './errors.ts';
export { validateArchiveStream, ArchiveStreamAbandonedError, type ArchiveStream } from './stream.ts';

/** validateArchive, throwing ArchiveRejectedError (listing every violation) unless the archive is ok. */
export async function assertValidArchive(
  bytes: Buffer,
  limits: ArchiveLimits,
  opts: ValidateOptions,
): Promise<ArchiveReport> {
  const report = await validateArchive(bytes, limits, opts);
  if (!report.ok) throw new ArchiveRejectedError(report.violations);
  return report;
}

/** validateArchiveChunks (the chunks are handed over, not copied), throwing ArchiveRejectedError unless ok. */
export async function assertValidArchiveChunks(
  chunks: readonly Buffer[],
  limits: ArchiveLimits,
  opts: ValidateOptions,
): Promise<ArchiveReport> {
  const report = await validateArchiveChunks(chunks, limits, opts);
  if (!report.ok) throw new ArchiveRejectedError(report.violations);
  return report;
}
