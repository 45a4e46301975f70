// The few plain file reads and directory creations the supervisor needs, behind our own functions.
// The supervisor layer imports no node:fs (eslint.config.js): what it asks of the disk is named here, so a reader
// finds every file touch of the supervisor in src/adapters, and a test can see the whole surface in one place.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';

/** Whether anything (file, directory, live link) is at `path`. */
export function pathExists(path: string): boolean {
  return existsSync(path);
}

/** The file's text (UTF-8), or null when nothing is at `path`. Other failures (a directory, no permission) throw. */
export function readTextIfPresent(path: string): string | null {
  return existsSync(path) ? readFileSync(path, 'utf8') : null;
}

/** Creates `dir` and its missing parents; an existing directory is left as it is. */
export function ensureDirectory(dir: string): void {
  mkdirSync(dir, { recursive: true });
}

/** Creates `dir` and its missing parents readable by the owner only (0700); an existing directory keeps its mode. */
export function ensurePrivateDirectory(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}
