// Every relative link in the Markdown a user reads (README.md, the root's policy files and docs/) points at a file
// that exists, and every #anchor at a heading that exists in that file, with GitHub's heading slugs, or at an HTML
// anchor (`<a id="…"></a>`, as TypeDoc writes above each entry of the library API's page).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '../../..');
const ROOT_PAGES = ['README.md', 'CONTRIBUTING.md', 'SECURITY.md', 'CHANGELOG.md'];

function markdownUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return markdownUnder(p);
    return name.endsWith('.md') ? [p] : [];
  });
}

/** The text outside fenced code blocks and code spans: links inside code are examples, not links. */
export function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered; and the ids
 * of HTML anchors. */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const text = m[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of prose(markdown).matchAll(/<a (?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

/** Every link target in a page: inline links and images, and reference definitions. */
export function linksOf(markdown: string): string[] {
  const text = prose(markdown);
  const inline = [...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
  const defs = [...text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]!);
  return [...inline, ...defs];
}

/** What is wrong with one link of `page` ('' when it resolves). */
function problemOf(page: string, target: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return ''; // http:, https:, mailto: are not checked here
  const [path, anchor] = target.split('#') as [string, string | undefined];
  const file = path === '' ? page : resolve(dirname(page), decodeURIComponent(path));
  if (!file.startsWith(REPO)) return `${target} leaves the repository`;
  if (!existsSync(file)) return `${target}: no file ${relative(REPO, file)}`;
  if (anchor === undefined || anchor === '') return '';
  if (!file.endsWith('.md')) return '';
  return anchorsOf(readFileSync(file, 'utf8')).has(anchor)
    ? ''
    : `${target}: no heading #${anchor} in ${relative(REPO, file)}`;
}

describe('links in the documentation', () => {
  const pages = [...ROOT_PAGES.map((p) => join(REPO, p)), ...markdownUnder(join(REPO, 'docs'))];

  it('slugs headings and finds links as a forge does', () => {
    expect([
      ...anchorsOf(
        '# The cluster on PostgreSQL\n## cap grant on a cluster\n## [0.1.0]\n' +
          '## One running copy of an instance, and the window\n## A\n## A\n' +
          '```\n# not a heading\n<a id="not-an-anchor"></a>\n```\n<a id="api-replay"></a>\n',
      ),
    ]).toEqual([
      'the-cluster-on-postgresql',
      'cap-grant-on-a-cluster',
      '010',
      'one-running-copy-of-an-instance-and-the-window',
      'a',
      'a-1',
      'api-replay',
    ]);
    expect(linksOf('[a](x.md) ![i](img.png "t") `[not](y.md)` [b](#h)\n[ref]: z.md#q\n```\n[no](w.md)\n```\n')).toEqual(
      ['x.md', 'img.png', '#h', 'z.md#q'],
    );
  });

  it('README.md and every page under docs/ link only to files and headings that exist', () => {
    expect(pages.length).toBeGreaterThan(10);
    const problems = pages.flatMap((page) =>
      linksOf(readFileSync(page, 'utf8'))
        .map((t) => problemOf(page, t))
        .filter((p) => p !== '')
        .map((p) => `${relative(REPO, page)}: ${p}`),
    );
    expect(problems).toEqual([]);
  });

  it('fails on a link to a missing heading', () => {
    expect(problemOf(join(REPO, 'README.md'), 'docs/guides/cluster.md#no-such-heading')).toMatch(
      /no heading #no-such-heading/,
    );
    expect(problemOf(join(REPO, 'README.md'), 'docs/no-such-page.md')).toMatch(/no file docs\/no-such-page\.md/);
  });

  it('marks as runnable only blocks the consumer test runs: the first program in the README, the library tour in getting-started', () => {
    const markers = pages.flatMap((page) =>
      [...readFileSync(page, 'utf8').matchAll(/<!-- consumer-test: (\S+) -->\n```/g)].map(
        (m) => `${relative(REPO, page)}: ${m[1]}`,
      ),
    );
    expect(markers.sort()).toEqual(['README.md: example.mjs', 'docs/getting-started.md: api.ts']);
    const consumer = readFileSync(join(REPO, 'test/int/repo/consumer.test.ts'), 'utf8');
    expect(consumer).toContain("readmeBlock('example.mjs')");
    expect(consumer).toContain("readmeBlock('api.ts', GUIDE)");
    expect(consumer).toContain("const GUIDE = 'docs/getting-started.md'");
  });

  it('keeps the README at most 200 lines, and docs/ free of load averages, times of day and tracker issue numbers', () => {
    expect(readFileSync(join(REPO, 'README.md'), 'utf8').trimEnd().split('\n').length).toBeLessThanOrEqual(200);
    for (const page of markdownUnder(join(REPO, 'docs'))) {
      const text = readFileSync(page, 'utf8');
      expect(text, relative(REPO, page)).not.toMatch(/\bload(?: average)? \d/i);
      expect(text, relative(REPO, page)).not.toMatch(/\b\d{1,2}:\d{2} UTC\b/);
      expect(text, relative(REPO, page)).not.toMatch(/\bissues? #?\d+\b/i);
    }
  });
});
