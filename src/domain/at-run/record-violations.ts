// The result type shared by the at-run record validators: every rule that fails adds one violation with a
// stable code and a path into the record, and the validators collect all of them before answering.

import { ValidationError, type ErrorCode } from '../errors.ts';

export interface RecordViolation {
  /** Stable rule code, e.g. `RUNTIME_PLATFORM_MISSING` (it becomes the error's code: one of the table's). */
  code: ErrorCode;
  /** Where in the record, e.g. `platforms[0].launcher.args[2]` (empty for the record itself). */
  path: string;
  message: string;
}

/**
 * A record broke one or more rules. `code` is the first violation's code (the most specific thing a caller
 * can branch on); `codes` and `violations` list every one, and `issues` renders them for humans.
 */
export class RecordValidationError extends ValidationError {
  readonly violations: readonly RecordViolation[];
  readonly codes: readonly string[];
  constructor(what: string, violations: readonly RecordViolation[]) {
    const first = violations[0];
    const issues = violations.map((v) => `${v.code}${v.path ? ` at ${v.path}` : ''}: ${v.message}`);
    super(
      first?.code ?? 'RECORD_INVALID',
      violations.length === 1 && first
        ? `invalid ${what}: ${issues[0]}`
        : `invalid ${what} (${violations.length} problems)`,
      issues,
      { violations },
    );
    this.violations = violations;
    this.codes = [...new Set(violations.map((v) => v.code))];
  }
}

/** Collects violations for one record. */
export class ViolationList {
  readonly items: RecordViolation[] = [];
  add(code: ErrorCode, path: string, message: string): void {
    this.items.push({ code, path, message });
  }
  get ok(): boolean {
    return this.items.length === 0;
  }
}

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' &&
  v !== null &&
  !Array.isArray(v) &&
  (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);

/** Adds one violation per key of `obj` that is not in `known` (records are closed: an unknown field is refused). */
export function unknownKeys(
  list: ViolationList,
  code: ErrorCode,
  path: string,
  obj: Record<string, unknown>,
  known: readonly string[],
): void {
  for (const key of Object.keys(obj)) {
    if (!known.includes(key)) list.add(code, path ? `${path}.${key}` : key, `unknown field ${JSON.stringify(key)}`);
  }
}

export const join = (path: string, key: string | number): string =>
  typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key;
