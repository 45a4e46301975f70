// A recursive copy that follows symbolic links: every link in the source becomes the file or directory it
// points at. Why not fs.cpSync(…, { dereference: true }): on Node 22 and 24 it copies symlinks *inside* the tree
// as symlinks (only Node 20 and 26 dereference them), and a relative link copied into the workspace points
// nowhere (examples/hello-app's app SDK is one).
import { copyFileSync, mkdirSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { RunlogError } from '../../domain/errors.ts';

export function copyDereferenced(src: string, dest: string, ancestors: ReadonlySet<string> = new Set()): void {
  const st = statSync(src); // follows links; a dangling one throws ENOENT naming it
  if (st.isDirectory()) {
    const real = realpathSync(src);
    if (ancestors.has(real))
      throw new RunlogError('APP_COPY_LOOP', `${src} links back to a directory that contains it`);
    mkdirSync(dest, { recursive: true, mode: st.mode & 0o7777 });
    const inside = new Set(ancestors).add(real);
    for (const name of readdirSync(src)) copyDereferenced(join(src, name), join(dest, name), inside);
  } else if (st.isFile()) {
    copyFileSync(src, dest); // keeps the mode (an executable entrypoint.sh stays executable)
  } else {
    throw new RunlogError('APP_COPY_UNSUPPORTED', `${src} is neither a file nor a directory`);
  }
}
