// Issue 13's must-hold: `grep -rn "as unknown as\|Record<string, any>" src` finds nothing, or each hit carries a
// one-line reason (`// why: …` on its line or the line before). This keeps it held.
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

describe('casts in src', () => {
  it('every `as unknown as` and `Record<string, any>` says why', () => {
    const unexplained: string[] = [];
    let hits = 0;
    for (const file of sources(SRC)) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (!/as unknown as|Record<string, any>/.test(line)) return;
        hits++;
        if (!/\/\/ why: \S/.test(line) && !/\/\/ why: \S/.test(lines[i - 1] ?? '')) unexplained.push(`${file.slice(SRC.length)}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(hits).toBeGreaterThan(0); // the scan reads the sources (a wrong path would find nothing and pass)
    expect(unexplained).toEqual([]);
  });
});
