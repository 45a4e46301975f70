// The web inspector in a real browser (Debian's chromium through playwright-core) against a real
// server and a real SQLite log: actor list → an app instance → scrub back in time → an execution's CIDs.
// Screenshots go to artifacts/inspector/*.png.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import { ensureToken } from '../../../src/server/token.ts';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import {
  CODE_CID,
  IMAGE,
  instanceSpec,
  launchChromium,
  RUNTIME_CID,
  seededRunlog,
  type Seeded,
} from '../../support/browser.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const SHOTS = join(import.meta.dirname, '../../..', 'artifacts', 'inspector');

describe('web inspector (chromium)', () => {
  let home: string;
  let seeded: Seeded;
  let server: RunningServer;
  let token: string;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  const requested: string[] = [];

  const shot = async (name: string) => {
    await page.evaluate('window.scrollTo(0, 0)');
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  };
  const rows = () => page.locator('[data-testid=actor-row]');
  const text = (testid: string) => page.getByTestId(testid).first().innerText();

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    home = mkdtempSync(join(tmpdir(), 'runlog-inspector-'));
    seeded = await seededRunlog(home);
    token = ensureToken(home).token;
    server = await startServer({ runlog: seeded.rl, host: '127.0.0.1', port: 0, token, pollMs: 50 });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1440, height: 960 }, colorScheme: 'light' });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('request', (r) => requested.push(r.url()));
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await seeded?.rl.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('opens with the token from the URL fragment, keeps it in sessionStorage and drops it from the address', async () => {
    await page.goto(server.inspectorUrl);
    await expect.poll(() => rows().count()).toBe(4);
    expect(new URL(page.url()).hash).toBe('#/');
    expect(await page.evaluate("sessionStorage.getItem('runlog.token')")).toBe(token);
    await expect.poll(() => text('live-status')).toMatch(/^live/);
    expect(await text('db-path')).toBe(seeded.rl.dbPath);
    expect(await text('actor-count')).toBe('4 of 4 actors');
    // The overview: counts by kind and state, and the latest events of the log.
    expect(await text('tile-instance')).toMatch(/running\s*1/);
    expect(await text('tile-execution')).toMatch(/failed\s*1/);
    await expect.poll(() => page.locator('[data-testid=activity-row]').count()).toBe(27);
    await shot('01-actors');
  });

  it('filters the list by text, kind and state', async () => {
    await page.getByTestId('filter-text').fill('notes');
    await expect.poll(() => rows().count()).toBe(1);
    await page.getByTestId('filter-text').fill('');
    await page.getByTestId('filter-kind').selectOption('execution');
    await expect
      .poll(() => rows().evaluateAll((els) => els.map((e) => e.getAttribute('data-kind'))))
      .toEqual(['execution', 'execution']);
    await page.getByTestId('filter-kind').selectOption('');
    await page.getByTestId('filter-state').selectOption('stopped');
    await expect
      .poll(() => rows().evaluateAll((els) => els.map((e) => e.getAttribute('data-actor-id'))))
      .toEqual(['inst_old']);
    await page.getByTestId('filter-state').selectOption('');
    await expect.poll(() => rows().count()).toBe(4);
  });

  it('shows an app instance: its state, its statechart with the current state, and its timeline', async () => {
    await page.locator('[data-testid=actor-row][data-actor-id=inst_web]').click();
    await expect.poll(() => text('actor-title')).toBe('inst_web');
    expect(await text('actor-current-state')).toBe('running');
    await expect.poll(() => page.locator('[data-testid=event-row]').count()).toBe(11);
    await expect
      .poll(() => page.locator('[data-testid=chart-state].current').getAttribute('data-path'))
      .toBe('running');
    expect(await page.locator('[data-testid=chart-state][data-path="crashed.backoff"]').count()).toBe(1);
    expect(await text('scrub-state')).toBe('running');
    expect(await text('inst-tools')).toBe('curl, git');
    await shot('02-instance');
  });

  it('scrubs back to an earlier event and shows the state and context then', async () => {
    await page.getByTestId('scrubber').fill('3');
    await expect.poll(() => text('scrub-state')).toBe('healthy');
    await expect
      .poll(() => page.locator('[data-testid=chart-state].current').getAttribute('data-path'))
      .toBe('healthy');
    expect(await text('past-note')).toContain('8 later events');
    expect(await text('scrub-label')).toBe('v3 of 11 · healthy');
    expect(await page.locator('[data-testid=event-row].selected').getAttribute('data-version')).toBe('3');
    expect(await text('scrub-context')).toContain('"identity": "match"');
    expect(await text('event-changes')).toContain('identity');
    expect(new URL(page.url()).hash).toBe('#/actor/inst_web/v/3');

    // Clicking an event moves there too: the crash, with the transition it took marked in the chart.
    await page.locator('[data-testid=event-row][data-version="6"]').click();
    await expect.poll(() => text('scrub-state')).toBe('crashed.backoff');
    await expect
      .poll(() => page.locator('[data-testid=chart-state].current').getAttribute('data-path'))
      .toBe('crashed.backoff');
    expect(await page.locator('.ev.taken[data-event="instance.crashed"][data-source="running"]').count()).toBe(1);
    const changes = await text('event-changes');
    expect(changes).toContain('lastCrash');
    expect(changes).toContain('4201');
    expect(await text('state-at')).toContain('releasePort');
    await shot('03-instance-scrubbed');
  });

  it('diffs two chosen points of the history', async () => {
    await page.getByTestId('diff-a').selectOption('4');
    await page.getByTestId('diff-b').selectOption('11');
    const diffRows = page.locator('[data-testid=diff-changes] [data-testid=diff-row]');
    // In the context's key order; v4 → v11 spans the tool grant, the crash and the restart.
    await expect
      .poll(() =>
        diffRows.evaluateAll((els) => els.map((e) => `${e.getAttribute('data-op')} ${e.getAttribute('data-path')}`)),
      )
      .toEqual([
        'added spec.tools[1]',
        'changed runningSince',
        'changed pid',
        'changed port',
        'changed restarts',
        'changed lastCrash',
      ]);
    expect(await page.locator('#diff-summary').innerText()).toContain('1 added · 0 removed · 5 changed');
  });

  it('updates live as events arrive', async () => {
    await seeded.rl.send('instance', 'inst_web', { type: 'instance.pause-requested', data: {} });
    await expect.poll(() => text('actor-current-state')).toBe('paused');
    await expect.poll(() => page.locator('[data-testid=event-row]').count()).toBe(12);
    await expect
      .poll(() => page.locator('[data-testid=actor-row][data-actor-id=inst_web]').getAttribute('data-state'))
      .toBe('paused');
    // The user was looking at the past: the cursor stays where it was.
    expect(await text('scrub-state')).toBe('crashed.backoff');
    await page.getByTestId('follow-live').click();
    await expect.poll(() => text('scrub-state')).toBe('paused');
  });

  it('shows an execution with its CIDs, image digest, limits, volumes and output', async () => {
    await page.locator(`[data-testid=actor-row][data-actor-id="${seeded.executionId}"]`).click();
    await expect.poll(() => text('actor-title')).toBe(seeded.executionId);
    expect(await text('exec-code-cid')).toBe(CODE_CID);
    expect(await text('exec-runtime-cid')).toBe(RUNTIME_CID);
    expect(await text('exec-image')).toBe(IMAGE);
    expect(await text('exec-limits')).toContain('memoryMb 256');
    const volumes = await text('exec-volumes');
    expect(volumes).toContain('runlog-rt-3f3f3f3f3f3f');
    expect(volumes).toContain('runlog-code-bafyreigh2aki');
    expect(await text('exec-output')).toContain('"sum": 42');
    expect(await text('exec-outcome')).toBe('succeeded');
    expect(await page.locator('[data-testid=chart-state].current').getAttribute('data-path')).toBe('succeeded');
    await shot('04-execution');

    await page.locator(`[data-testid=actor-row][data-actor-id="${seeded.failedExecutionId}"]`).click();
    await expect.poll(() => text('actor-title')).toBe(seeded.failedExecutionId);
    expect(await text('exec-failure')).toContain('resolution · RECORD_NOT_FOUND');
    expect(await text('actor-alert')).toContain('resolution failure · RECORD_NOT_FOUND');
    await shot('05-execution-failed');
  });

  it('loaded nothing from anywhere else, never put the token in a URL, and logged no errors', () => {
    expect(requested.length).toBeGreaterThan(5);
    for (const u of requested) {
      expect(u.startsWith(server.url), u).toBe(true);
      expect(u, 'token in a request URL').not.toContain(token);
    }
    expect(problems).toEqual([]);
  });

  it('says when the state shown is not supervised, and links the trace recorded in the first event', async () => {
    // A log nobody supervises (opened read-only, no heartbeat ever), served by an inspector of its own.
    const home2 = mkdtempSync(join(tmpdir(), 'runlog-inspector-unsup-'));
    const rl2 = await createRunlog({ home: home2, supervise: false, readOnly: false });
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    await runlogInternals(rl2).host.create('instance', 'inst_seen', {
      type: 'instance.requested',
      data: { spec: instanceSpec({ instanceId: 'inst_seen' }) },
      meta: { traceId },
    });
    await rl2.send('instance', 'inst_seen', {
      type: 'instance.spawned',
      data: { pid: 4242, host: '127.0.0.1', port: 41001 },
    });
    const token2 = ensureToken(home2).token;
    const server2 = await startServer({ runlog: rl2, host: '127.0.0.1', port: 0, token: token2 });
    process.env.RUNLOG_TRACE_URL = 'http://traces.example/trace/{traceId}';
    const other = await browser.newPage({ viewport: { width: 1440, height: 960 } });
    try {
      await other.goto(server2.inspectorUrl);
      await other.locator('[data-testid=actor-row][data-actor-id="inst_seen"]').click();
      await expect.poll(() => other.getByTestId('actor-title').innerText()).toBe('inst_seen');
      expect(await other.getByTestId('actor-unsupervised').innerText()).toMatch(
        /not supervised — no supervisor has run on this log; this is the last known state/,
      );
      const link = other.getByTestId('actor-trace').locator('a');
      expect(await link.innerText()).toBe(traceId);
      expect(await link.getAttribute('href')).toBe(`http://traces.example/trace/${traceId}`);
      await other.screenshot({ path: join(SHOTS, '06-unsupervised.png'), fullPage: true });
    } finally {
      delete process.env.RUNLOG_TRACE_URL;
      await other.close();
      await server2.close();
      await rl2.close();
      rmSync(home2, { recursive: true, force: true });
    }
  });

  it('asks for the token when it has none', async () => {
    const fresh = await browser.newPage();
    await fresh.goto(server.url);
    await expect.poll(() => fresh.getByTestId('login').isVisible()).toBe(true);
    await fresh.getByTestId('login-token').fill('not-a-token');
    await fresh.keyboard.press('Enter');
    expect(await fresh.locator('#login-error').innerText()).toContain('64 hex characters');
    await fresh.close();
  });
});
