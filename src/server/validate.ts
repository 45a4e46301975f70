// Validation at the HTTP boundary: request bodies and query strings become typed values, or one
// ValidationError listing every problem.
import { ValidationError } from '../domain/errors.ts';

export class Checker {
  readonly issues: string[] = [];
  constructor(private readonly where: string) {}

  problem(message: string): void {
    this.issues.push(message);
  }

  done(): void {
    if (this.issues.length > 0) {
      throw new ValidationError(
        'INVALID_REQUEST',
        `invalid ${this.where}${this.issues.length === 1 ? `: ${this.issues[0]}` : ''}`,
        this.issues,
      );
    }
  }

  /** Rejects keys the endpoint does not know (a typo should not be silently ignored). */
  only(obj: Record<string, unknown>, keys: readonly string[]): void {
    for (const k of Object.keys(obj))
      if (!keys.includes(k)) this.problem(`unknown field '${k}' (known: ${keys.join(', ') || 'none'})`);
  }

  string(
    obj: Record<string, unknown>,
    key: string,
    opts: { required?: boolean; max?: number; pattern?: RegExp; hint?: string } = {},
  ): string | undefined {
    const v = obj[key];
    if (v === undefined || v === null) {
      if (opts.required) this.problem(`${key} is required`);
      return undefined;
    }
    if (typeof v !== 'string' || v.length === 0) {
      this.problem(`${key} must be a non-empty string`);
      return undefined;
    }
    if (opts.max !== undefined && v.length > opts.max) {
      this.problem(`${key} is longer than ${opts.max} characters`);
      return undefined;
    }
    if (opts.pattern && !opts.pattern.test(v)) {
      this.problem(`${key} ${JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v)} ${opts.hint ?? 'is malformed'}`);
      return undefined;
    }
    return v;
  }

  oneOf<T extends string>(obj: Record<string, unknown>, key: string, allowed: readonly T[]): T | undefined {
    const v = obj[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string' || !allowed.includes(v as T)) {
      this.problem(`${key} must be one of ${allowed.join(', ')}`);
      return undefined;
    }
    return v as T;
  }

  integer(obj: Record<string, unknown>, key: string, opts: { min?: number; max?: number } = {}): number | undefined {
    const v = obj[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
      this.problem(`${key} must be a whole number`);
      return undefined;
    }
    if (opts.min !== undefined && v < opts.min) this.problem(`${key} must be at least ${opts.min}`);
    else if (opts.max !== undefined && v > opts.max) this.problem(`${key} must be at most ${opts.max}`);
    else return v;
    return undefined;
  }
}

/** Query-string integers: "12" → 12; absent → undefined; anything else is a problem. */
export function queryInt(c: Checker, q: URLSearchParams, key: string, min = 0): number | undefined {
  const raw = q.get(key);
  if (raw === null || raw === '') return undefined;
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    c.problem(`?${key} must be a whole number, not '${raw}'`);
    return undefined;
  }
  const n = Number(raw);
  if (n < min) {
    c.problem(`?${key} must be at least ${min}`);
    return undefined;
  }
  return n;
}

export function queryBool(c: Checker, q: URLSearchParams, key: string): boolean {
  const raw = q.get(key);
  if (raw === null) return false;
  if (raw === '' || raw === '1' || raw === 'true') return true;
  if (raw === '0' || raw === 'false') return false;
  c.problem(`?${key} must be true or false, not '${raw}'`);
  return false;
}
