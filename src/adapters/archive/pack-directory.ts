// Packs a directory on disk as a canonical tar (write.ts) whose one top-level directory is the directory's own name:
// how an author's code directory becomes a code record's blob. Links are kept as links, never followed.
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { ValidationError } from '../../domain/errors.ts';
import type { ArchiveEntry } from './types.ts';
import { writeArchive } from './write.ts';

/** Packs a directory as a tar with exactly one top-level directory (its own name). */
export async function packCodeDirectory(dir: string): Promise<{ archive: Buffer; top: string }> {
  const root = resolve(dir);
  const top = basename(root);
  const entries: ArchiveEntry[] = [{ path: top, type: 'directory', mode: 0o755, size: 0 }];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const abs = join(root, r);
      const st = lstatSync(abs);
      const path = `${top}/${r}`;
      if (st.isDirectory()) {
        entries.push({ path, type: 'directory', mode: 0o755, size: 0 });
        walk(r);
      } else if (st.isSymbolicLink()) {
        entries.push({ path, type: 'symlink', mode: 0o777, size: 0, linkname: readlinkSync(abs) });
      } else if (st.isFile()) {
        const data = readFileSync(abs);
        entries.push({ path, type: 'file', mode: st.mode & 0o111 ? 0o755 : 0o644, size: data.length, data });
      } else {
        throw new ValidationError('CODE_DIR_INVALID', `${abs} is not a file, directory or symlink`);
      }
    }
  };
  walk('');
  return { archive: await writeArchive(entries), top };
}
