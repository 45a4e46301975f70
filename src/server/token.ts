// The bearer token that guards the HTTP API: 32 random bytes as hex in $RUNLOG_HOME/token, mode 0600.
// Created once and reused; a token file whose mode is looser than 0600 is tightened at start.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { closeSync, fchmodSync, lstatSync, mkdirSync, openSync, readFileSync, writeSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { RunlogError } from '../domain/errors.ts';

const TOKEN_SHAPE = /^[0-9a-f]{64}$/;

export interface TokenFile {
  path: string;
  token: string;
  /** true when this call wrote the file. */
  created: boolean;
  /** Set when an existing file's mode was looser than 0600 and was tightened. */
  tightenedFrom?: number;
}

export const tokenPath = (home: string): string => join(home, 'token');

/** Reads <home>/token, or creates it (O_EXCL, 0600) with a fresh random token. */
export function ensureToken(home: string): TokenFile {
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const path = tokenPath(home);
  const token = randomBytes(32).toString('hex');
  try {
    const fd = openSync(path, 'wx', 0o600);
    try {
      fchmodSync(fd, 0o600); // the umask can only remove bits; make the mode exact anyway
      writeSync(fd, `${token}\n`);
    } finally {
      closeSync(fd);
    }
    return { path, token, created: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return readExisting(path);
}

function readExisting(path: string): TokenFile {
  const st = lstatSync(path);
  if (!st.isFile())
    throw new RunlogError(
      'TOKEN_INVALID',
      `${path} is not a regular file (a symlink or something else); remove it and start again`,
      { path },
    );
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) {
    throw new RunlogError('TOKEN_INVALID', `${path} belongs to uid ${st.uid}, not to this user; refusing to use it`, {
      path,
    });
  }
  const mode = st.mode & 0o777;
  let tightenedFrom: number | undefined;
  if (mode !== 0o600) {
    chmodSync(path, 0o600);
    tightenedFrom = mode;
  }
  const token = readFileSync(path, 'utf8').trim();
  if (!TOKEN_SHAPE.test(token)) {
    throw new RunlogError(
      'TOKEN_INVALID',
      `${path} does not hold a runlog token (64 hex characters); remove it to get a new one`,
      { path },
    );
  }
  return { path, token, created: false, ...(tightenedFrom !== undefined ? { tightenedFrom } : {}) };
}

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** Constant-time comparison (both sides are hashed first, so lengths never leak either). */
export function tokenMatches(expected: string, given: string): boolean {
  return timingSafeEqual(digest(expected), digest(given));
}

/** The token from an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header);
  return m ? m[1]! : null;
}
