// Every test file runs in exactly one vitest project, chosen by the folder it sits in (vitest.config.ts).
// The config selects by folder globs only, so a file dropped outside the tier folders (test/x.test.ts) would be
// selected by no project and never run; this test names such a file instead of letting it go quiet.
import { readdirSync } from 'node:fs';
import { join, matchesGlob } from 'node:path';
import { describe, expect, it } from 'vitest';
import config from '../../../vitest.config.ts';

const REPO = join(import.meta.dirname, '../../..');

interface Project {
  name: string;
  include: string[];
  exclude: string[];
}

const projects: Project[] = (config.test?.projects ?? []).map((p) => {
  const t = (p as { test: { name: string; include: string[]; exclude?: string[] } }).test;
  return { name: t.name, include: t.include, exclude: t.exclude ?? [] };
});

/** Test files under test/, as paths from the repository root. */
function testFiles(): string[] {
  return readdirSync(join(REPO, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts') && !f.startsWith('fixtures/'))
    .map((f) => `test/${f}`)
    .sort();
}

function projectsOf(file: string): string[] {
  return projects
    .filter((p) => p.include.some((g) => matchesGlob(file, g)) && !p.exclude.some((g) => matchesGlob(file, g)))
    .map((p) => p.name);
}

describe('the test tree', () => {
  it('has the four projects the scripts run', () => {
    expect(projects.map((p) => p.name).sort()).toEqual(['e2e', 'int', 'int-cluster', 'unit']);
  });

  it('puts every test file in exactly one project', () => {
    const files = testFiles();
    expect(files.length).toBeGreaterThan(100);
    const misplaced = files.map((f) => ({ f, in: projectsOf(f) })).filter((x) => x.in.length !== 1);
    expect(
      misplaced,
      'test files in no project or in more than one (move them under test/unit, int, e2e or contract)',
    ).toEqual([]);
  });

  it('keeps the tier suffix only in test/contract, where one folder holds two tiers', () => {
    const files = testFiles();
    expect(files.filter((f) => !f.startsWith('test/contract/') && /\.(unit|int)\.test\.ts$/.test(f))).toEqual([]);
    expect(files.filter((f) => f.startsWith('test/contract/') && !/\.(unit|int)\.test\.ts$/.test(f))).toEqual([]);
  });
});
