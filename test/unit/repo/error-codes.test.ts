// The one table of error codes (src/domain/error-codes.ts): every code has a category, every category an exit
// status and an HTTP status, and the CLI and the API both read them from there (no second table).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EXIT, exitCodeFor } from '../../../src/cli/output.ts';
import {
  CATEGORIES,
  ERROR_CODES,
  exitStatusOf,
  httpStatusOf,
  isErrorCode,
  type ErrorCode,
} from '../../../src/domain/error-codes.ts';
import { RunlogError, StoreCorruptError, StoreWalDamagedError, ValidationError } from '../../../src/domain/errors.ts';
import { HttpError, statusFor } from '../../../src/server/http.ts';

const codes = Object.keys(ERROR_CODES) as ErrorCode[];

describe('the error-code table', () => {
  it('maps every code to an exit status and an HTTP status through its category', () => {
    expect(codes.length).toBeGreaterThan(100);
    for (const code of codes) {
      const category = CATEGORIES[ERROR_CODES[code]];
      expect(category, code).toBeDefined();
      expect(Object.values(EXIT), code).toContain(exitStatusOf(code));
      expect(exitStatusOf(code), code).not.toBe(EXIT.ok);
      expect(httpStatusOf(code), code).toBeGreaterThanOrEqual(400);
      expect(httpStatusOf(code), code).toBeLessThan(600);
    }
  });

  it('the CLI and the API answer from the table for every code (local errors and codes sent back alike)', () => {
    for (const code of codes) {
      const err = new RunlogError(code, 'x');
      expect(exitCodeFor(err), code).toBe(exitStatusOf(code));
      expect(statusFor(err), code).toBe(httpStatusOf(code));
    }
    // Not a RunlogError: a bug, never a usage error.
    expect(exitCodeFor(new Error('bug'))).toBe(EXIT.failure);
    expect(statusFor(new Error('bug'))).toBe(500);
  });

  it('keeps the documented statuses', () => {
    const exit = (code: ErrorCode) => exitStatusOf(code);
    const http = (code: ErrorCode) => httpStatusOf(code);
    // README, "The CLI": 2 usage, 3 no supervisor, 4 damaged log or history, 5 conflict, 1 not found / other.
    for (const c of [
      'USAGE',
      'INVALID_REQUEST',
      'MANIFEST_INVALID',
      'INPUT_INVALID',
      'TOOL_UNKNOWN',
      'REPLAY_TO_INVALID',
    ] as const)
      expect(exit(c), c).toBe(2);
    expect(exit('NO_SUPERVISOR')).toBe(3);
    for (const c of [
      'STORE_CORRUPT',
      'STORE_FOREIGN',
      'STORE_TOO_NEW',
      'STORE_WAL_LOST',
      'STORE_EMPTY',
      'STORE_TRUNCATED',
      'STORE_CHAIN_BROKEN',
      'STORE_WAL_DAMAGED',
      'HISTORY_INVALID',
      'REPLAY',
    ] as const) {
      expect(exit(c), c).toBe(4);
    }
    for (const c of ['ILLEGAL_EVENT', 'CONCURRENCY', 'ACTOR_EXISTS'] as const) expect(exit(c), c).toBe(5);
    for (const c of ['NOT_FOUND', 'SETUP_MISSING', 'DOCKER_UNAVAILABLE'] as const) expect(exit(c), c).toBe(1);
    // README and the API tests: 400 invalid input, 413 too large, 404, 409, 501, 503, 401, 403, 405, 415.
    expect(http('INPUT_INVALID')).toBe(400);
    expect(http('INPUT_TOO_LARGE')).toBe(413);
    expect(http('PAYLOAD_TOO_LARGE')).toBe(413);
    expect(http('NOT_FOUND')).toBe(404);
    expect(http('ILLEGAL_EVENT')).toBe(409);
    expect(http('NOT_SUPPORTED')).toBe(501);
    expect(http('TOO_MANY_STREAMS')).toBe(503);
    expect(http('HOST_CLOSED')).toBe(503);
    expect(http('TIMEOUT')).toBe(504);
    expect(http('UNAUTHORIZED')).toBe(401);
    expect(http('FORBIDDEN_HOST')).toBe(403);
    expect(http('METHOD_NOT_ALLOWED')).toBe(405);
    expect(http('UNSUPPORTED_MEDIA_TYPE')).toBe(415);
  });

  it('subclasses carry their own codes through the same table', () => {
    expect(exitCodeFor(new StoreCorruptError('/x', 'bad'))).toBe(4);
    expect(exitCodeFor(new StoreWalDamagedError('/x', 3, 2, 7))).toBe(4);
    expect(statusFor(new ValidationError('MANIFEST_INVALID', 'x', ['a']))).toBe(400);
    expect(new HttpError('PAYLOAD_TOO_LARGE', 'x').status).toBe(413);
  });

  it('tells a code from a string that is not one (codes the API sends back)', () => {
    expect(isErrorCode('NOT_FOUND')).toBe(true);
    expect(isErrorCode('HTTP_500')).toBe(false);
    expect(isErrorCode('toString')).toBe(false);
    expect(isErrorCode(undefined)).toBe(false);
  });

  it('leaves no second table in the CLI or the server', () => {
    const sources = [
      'src/cli/output.ts',
      'src/cli/main.ts',
      'src/server/http.ts',
      'src/server/api.ts',
      'src/server/http-server.ts',
      'src/server/sse.ts',
      'src/server/metrics-server.ts',
    ];
    for (const file of sources) {
      const text = readFileSync(new URL(`../../../${file}`, import.meta.url), 'utf8');
      // No status literal next to an error, no code-pattern regex, no per-code map.
      expect(text, file).not.toMatch(/new HttpError\(\s*\d/);
      expect(text, file).not.toMatch(/sendJson\(res, [45]\d\d/);
      expect(text, file).not.toMatch(/_\(?INVALID\|/);
      expect(text, file).not.toMatch(/Record<string, number> = \{/);
    }
  });
});
