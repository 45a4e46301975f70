// Installs an app directory into the workspace: a copy whose source has not changed since it was installed is kept
// (concurrent spawns of one app must not pull files from under each other); a changed one is written beside it and
// swapped in by rename, so a reader never sees a half-copied app.
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { copyDereferenced } from './copy-dereferenced.ts';

/** The file in an installed copy that names the source signature it was copied from. */
const MARKER = '.runlog-installed-from';

/** What identifies an app directory's content cheaply: every path with its size and modification time. */
function sourceSignature(dir: string): string {
  const parts: string[] = [resolve(dir)];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      if (name === 'node_modules' || name === MARKER) continue;
      const r = rel ? `${rel}/${name}` : name;
      const st = statSync(join(dir, r));
      if (st.isDirectory()) walk(r);
      else parts.push(`${r}:${st.size}:${st.mtimeMs}`);
    }
  };
  walk('');
  return createHash('sha256').update(parts.join('\n')).digest('hex');
}

/** Whether `target` exists and is `src` itself (the same directory once links are resolved). */
export function isSameDirectory(target: string, src: string): boolean {
  return existsSync(target) && realpathSync(target) === realpathSync(src);
}

/** Copies the app at `src` to `target` (links followed), unless `target` already holds this very content. */
export function installApp(src: string, target: string): void {
  const signature = sourceSignature(src);
  const marker = join(target, MARKER);
  if (existsSync(marker) && readFileSync(marker, 'utf8') === signature) return;
  mkdirSync(dirname(target), { recursive: true });
  const fresh = `${target}.installing-${process.pid}-${Date.now()}`;
  copyDereferenced(src, fresh);
  writeFileSync(join(fresh, MARKER), signature);
  const old = `${target}.old-${process.pid}-${Date.now()}`;
  if (existsSync(target)) renameSync(target, old);
  renameSync(fresh, target);
  rmSync(old, { recursive: true, force: true });
}
