// The web inspector on an actor with a long history (real chromium, real server, a real SQLite log): the timeline
// holds one page of steps, pages on with "earlier"/"later" and with the scrubber, and never asks for the whole
// history (every replay request it makes is a page or a single state).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import { ensureToken } from '../../../src/server/token.ts';
import { launchChromium } from '../../support/browser.ts';
import { writeDeepActor } from '../../support/deep-actor.ts';

/** Three pages and a bit. */
const EVENTS = 3_037;

describe('web inspector on a long history (chromium)', () => {
  let home: string;
  let rl: Runlog;
  let server: RunningServer;
  let browser: Browser;
  let page: Page;
  const requested: string[] = [];
  const problems: string[] = [];
  const rowVersions = () =>
    page
      .locator('[data-testid=event-row]')
      .evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-version'))));
  const text = (testid: string) => page.getByTestId(testid).first().innerText();

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'runlog-inspector-paging-'));
    writeDeepActor(join(home, 'runlog.db'), 'inst_long', EVENTS, { snapshots: true });
    rl = await createRunlog({ home, supervise: false });
    server = await startServer({ runlog: rl, host: '127.0.0.1', port: 0, token: ensureToken(home).token, pollMs: 50 });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1440, height: 960 } });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    page.on('request', (r) => requested.push(r.url()));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await rl?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('opens on the latest page of 1000 steps', async () => {
    await page.goto(`${server.url}#token=${ensureToken(home).token}`);
    await page.locator('[data-testid=actor-row][data-actor-id=inst_long]').click();
    await expect.poll(() => text('actor-title')).toBe('inst_long');
    await expect.poll(async () => (await rowVersions()).length).toBe(1000);
    const versions = await rowVersions();
    expect([versions[0], versions.at(-1)]).toEqual([EVENTS - 999, EVENTS]);
    expect(await page.locator('#timeline-count').innerText()).toBe(
      `${EVENTS} events · showing v${EVENTS - 999}–v${EVENTS}`,
    );
    expect(await page.getByTestId('steps-later').isDisabled()).toBe(true);
    expect(await text('scrub-label')).toMatch(new RegExp(`^v${EVENTS} of ${EVENTS}`));
  });

  it('pages back with "earlier", and the scrubber loads the page holding the version it is moved to', async () => {
    await page.getByTestId('steps-earlier').click();
    await expect.poll(async () => (await rowVersions())[0]).toBe(EVENTS - 1999);
    expect((await rowVersions()).at(-1)).toBe(EVENTS - 1000);
    await page.getByTestId('scrubber').fill('5');
    await expect.poll(async () => (await rowVersions())[0]).toBe(1);
    await expect.poll(() => page.locator('[data-testid=event-row].selected').getAttribute('data-version')).toBe('5');
    expect(await page.getByTestId('steps-earlier').isDisabled()).toBe(true);
    await expect.poll(() => text('scrub-state')).toBe('running');
    await page.getByTestId('steps-later').click();
    await expect.poll(async () => (await rowVersions())[0]).toBe(1001);
  });

  it('never asks for the whole history', () => {
    const replays = requested.filter((u) => u.includes('/replay'));
    expect(replays.length).toBeGreaterThan(0);
    for (const u of replays) expect(u, u).toMatch(/[?&](after=\d+&limit=1000|to=\d+&steps=none)/);
    expect(problems).toEqual([]);
  });
});
