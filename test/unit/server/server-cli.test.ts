// `runlog serve` as a user runs it: a real process, a real port on 127.0.0.1, the token file, signals.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { main } from '../../../src/cli/main.ts';
import { instanceSpec } from '../../support/browser.ts';
import { cliArgs } from '../../support/cli.ts';
import { capture } from '../../support/cli-in-process.ts';
import { freshDirs } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

// Registered before the children's hook, so (after-hooks run in reverse) the children are killed first.
const freshDir = freshDirs('runlog-serve-');
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

interface Served {
  child: ChildProcess;
  info: { url: string; host: string; port: number; tokenFile: string; db: string };
  stderr: () => string;
  exit: Promise<number | null>;
}

/** Starts `runlog serve --listen 127.0.0.1:0 --json` and waits for the JSON line with the bound port. */
async function serve(home: string): Promise<Served> {
  const child = spawn(process.execPath, cliArgs('serve', '--listen', '127.0.0.1:0', '--json', '--home', home), {
    cwd: join(import.meta.dirname, '../../..'),
    env: { ...process.env, RUNLOG_HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const info = await new Promise<Served['info']>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString();
      try {
        resolve(JSON.parse(stdout));
      } catch {
        // not complete yet
      }
    });
    void exit.then((code) => reject(new Error(`runlog serve exited with ${code} before listening:\n${stderr}`)));
  });
  return { child, info, stderr: () => stderr, exit };
}

describe('runlog serve', () => {
  it('refuses a non-loopback --listen with a usage error (exit 2) before opening anything', async () => {
    const home = freshDir();
    for (const addr of ['0.0.0.0:7420', '192.168.0.10:7420', '[::]:7420', 'example.com:7420']) {
      const c = capture();
      expect(await main(['serve', '--listen', addr, '--home', home], c.factory)).toBe(2);
      expect(c.err.join('\n')).toMatch(/USAGE: .*binds only to loopback \(127\.0\.0\.0\/8 or ::1\)/);
    }
    expect(existsSync(join(home, 'token'))).toBe(false);
    expect(existsSync(join(home, 'runlog.db'))).toBe(false);
  });

  it('refuses a --ports or $RUNLOG_PORTS that is not a range of ports with a usage error (exit 2) before opening anything', async () => {
    const home = freshDir();
    for (const range of ['4100', '5000-4000', '80-90', '4100-70000', 'a-b']) {
      const c = capture();
      expect(await main(['serve', '--ports', range, '--home', home], c.factory)).toBe(2);
      expect(c.err.join('\n')).toContain(
        `USAGE: --ports must be <min>-<max>, two port numbers from 1024 to 65535 with min ≤ max (like 4100-4999), not '${range}'`,
      );
    }
    const saved = process.env.RUNLOG_PORTS;
    process.env.RUNLOG_PORTS = '9-8';
    try {
      const c = capture();
      expect(await main(['serve', '--home', home], c.factory)).toBe(2);
      expect(c.err.join('\n')).toContain('USAGE: $RUNLOG_PORTS must be <min>-<max>');
    } finally {
      if (saved === undefined) delete process.env.RUNLOG_PORTS;
      else process.env.RUNLOG_PORTS = saved;
    }
    expect(existsSync(join(home, 'token'))).toBe(false);
    expect(existsSync(join(home, 'runlog.db'))).toBe(false);
  });

  it('supervises the log, creates the 0600 token, prints the bound port as JSON, guards the API, and exits 0 on SIGTERM', async () => {
    const home = freshDir();
    // A history written without running effects; the served supervisor takes it from there.
    const rl = await createRunlog({ home, supervise: false, readOnly: false });
    await runlogInternals(rl).host.create('instance', 'inst_a', {
      type: 'instance.requested',
      data: { spec: instanceSpec({ instanceId: 'inst_a' }) },
    });
    await rl.close();

    const s = await serve(home);
    expect(s.info).toMatchObject({
      host: '127.0.0.1',
      url: `http://127.0.0.1:${s.info.port}/`,
      tokenFile: join(home, 'token'),
      db: join(home, 'runlog.db'),
    });
    expect(s.info.port).toBeGreaterThan(0);
    expect(statSync(s.info.tokenFile).mode & 0o777).toBe(0o600);
    const token = readFileSync(s.info.tokenFile, 'utf8').trim();
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    // The inspector's address carries the token in the fragment, never in the query.
    expect(s.stderr()).toContain(`inspector at http://127.0.0.1:${s.info.port}/#token=${token}`);
    expect(s.stderr()).not.toMatch(/\?token=/);

    expect((await fetch(new URL('/api/actors', s.info.url))).status).toBe(401);
    const res = await fetch(new URL('/api/actors/inst_a', s.info.url), {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: 'inst_a', kind: 'instance' });

    s.child.kill('SIGTERM');
    expect(await s.exit).toBe(0);
    expect(s.stderr()).toContain('SIGTERM: shutting down');
    await expect(fetch(s.info.url)).rejects.toThrow();
  });

  it('reuses an existing token and tightens its mode; SIGINT also exits 0', async () => {
    const home = freshDir();
    const token = 'ab'.repeat(32);
    writeFileSync(join(home, 'token'), `${token}\n`);
    chmodSync(join(home, 'token'), 0o644);
    const s = await serve(home);
    expect(statSync(join(home, 'token')).mode & 0o777).toBe(0o600);
    expect(s.stderr()).toContain('had mode 0644; set it to 0600');
    const res = await fetch(new URL('/api/health', s.info.url), { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    s.child.kill('SIGINT');
    expect(await s.exit).toBe(0);
  });
});
