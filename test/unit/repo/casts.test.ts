// Issue 13's must-hold: `grep -rn "as unknown as\|Record<string, any>" src` finds nothing, or each hit carries a
// one-line reason: `// why: …` on its line, or in a comment that opens the statement it is in (Prettier breaks a long
// statement over lines, so the cast may sit a few lines below the statement's first). This keeps it held.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = new URL('../../../src/', import.meta.url).pathname;

function* sources(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* sources(p);
    else if (/\.(ts|mts)$/.test(e.name)) yield p;
  }
}

const CAST = /as unknown as|Record<string, any>/;
const WHY = /\/\/ why: \S/;
/** How far above a cast its statement may start (a statement broken over more lines than this is too long). */
const STATEMENT_LINES = 8;

/** Whether the cast on line `i` says why: on its line, or in a comment above it before the previous statement ends. */
function explained(lines: readonly string[], i: number): boolean {
  if (WHY.test(lines[i]!)) return true;
  for (let k = i - 1; k >= 0 && k >= i - STATEMENT_LINES; k--) {
    const above = lines[k]!.trim();
    if (WHY.test(above)) return true;
    if (above.startsWith('//')) continue;
    if (above === '' || above.endsWith(';') || above.endsWith('}')) return false; // the previous statement ended
  }
  return false;
}

/** The casts of a file's lines that do not say why, as `line: text`. */
function unexplainedCasts(lines: readonly string[]): string[] {
  return lines.flatMap((line, i) => (CAST.test(line) && !explained(lines, i) ? [`${i + 1}: ${line.trim()}`] : []));
}

describe('casts in src', () => {
  it('every `as unknown as` and `Record<string, any>` says why', () => {
    const unexplained: string[] = [];
    let hits = 0;
    for (const file of sources(SRC)) {
      const lines = readFileSync(file, 'utf8').split('\n');
      hits += lines.filter((l) => CAST.test(l)).length;
      unexplained.push(...unexplainedCasts(lines).map((u) => `${file.slice(SRC.length)}:${u}`));
    }
    expect(hits).toBeGreaterThan(0); // the scan reads the sources (a wrong path would find nothing and pass)
    expect(unexplained).toEqual([]);
  });

  it('a reason counts on the cast’s line or atop the statement Prettier broke over lines, not atop an earlier statement', () => {
    const broken = [
      '// why: rows are arrays',
      'const page = db',
      '  .prepare(sql)',
      '  .raw(true) as unknown as Stmt;',
    ];
    expect(unexplainedCasts(broken)).toEqual([]);
    expect(unexplainedCasts(['const x = y as unknown as Z; // why: checked above'])).toEqual([]);
    const earlier = ['// why: a reason for the first', 'const a = 1;', 'const b = c as unknown as D;'];
    expect(unexplainedCasts(earlier)).toEqual(['3: const b = c as unknown as D;']);
    expect(unexplainedCasts(['', 'const b = c as unknown as D;'])).toEqual(['2: const b = c as unknown as D;']);
  });
});
