// The archive adapter's typed refusal (one place, so the batch and the streamed validators throw the same error).
import { ValidationError } from '../../domain/errors.ts';
import type { ArchiveViolation } from './types.ts';

function describe(v: ArchiveViolation): string {
  return (
    `${v.code}` +
    `${v.path !== undefined ? ` ${JSON.stringify(v.path.length > 200 ? `${v.path.slice(0, 200)}…` : v.path)}` : ''}` +
    `: ${v.message}`
  );
}

/** The archive broke at least one rule; `violations` lists every one (also rendered in `issues`). */
export class ArchiveRejectedError extends ValidationError {
  readonly violations: ArchiveViolation[];
  constructor(violations: ArchiveViolation[]) {
    const codes = [...new Set(violations.map((v) => v.code))];
    super(
      'ARCHIVE_REJECTED',
      `archive rejected: ${violations.length} violation${violations.length === 1 ? '' : 's'} (${codes.join(', ')})`,
      violations.map(describe),
      {
        violations,
      },
    );
    this.violations = violations;
  }
}
