// `npm run build`: a clean dist/ compiled from src/ (tsconfig.build.json), plus the files the compiled code
// reads or imports at run time that are not TypeScript: the inspector's static files (served from
// dist/server/inspector/, found through import.meta.url) and the app SDK's dependency-free JavaScript with
// its declarations (dist/app-sdk/sdk.mjs, sdk.d.mts). runtimes/, examples/ and lexicons/ stay at the package
// root, where the compiled demo finds them (same depth: dist/cli/commands ↔ src/cli/commands).
// `--if-stale` does nothing when dist/ was built after the last change to src/ or the tsconfigs (the `prepare`
// and `demo` scripts use it: `npm ci` in a fresh checkout builds, a rebuilt tree is not rebuilt again).
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

const stamp = join(dist, '.built');

function newestInput() {
  let newest = 0;
  const walk = (p) => {
    const st = statSync(p);
    newest = Math.max(newest, st.mtimeMs);
    if (st.isDirectory()) for (const f of readdirSync(p)) walk(join(p, f));
  };
  for (const p of ['src', 'tsconfig.json', 'tsconfig.build.json', 'scripts/build.mjs']) walk(join(root, p));
  return newest;
}

if (process.argv.includes('--if-stale')) {
  let built = 0;
  try {
    built = statSync(stamp).mtimeMs;
  } catch {
    // never built
  }
  if (built > newestInput()) process.exit(0);
}

rmSync(dist, { recursive: true, force: true });
const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
if (r.status !== 0) process.exit(r.status ?? 1);

cpSync(join(root, 'src/server/inspector'), join(dist, 'server/inspector'), { recursive: true });
for (const f of readdirSync(join(root, 'src/app-sdk'))) {
  if (f.endsWith('.mjs') || f.endsWith('.d.mts')) cpSync(join(root, 'src/app-sdk', f), join(dist, 'app-sdk', f));
}
writeFileSync(stamp, `${new Date().toISOString()}\n`);
