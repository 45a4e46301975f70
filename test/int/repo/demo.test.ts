// The README's main job (`npm run demo`) on a fresh home: it must run as written and leave nothing behind.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliArgs } from '../../support/cli.ts';
import { docker, requireDocker } from '../../support/docker.ts';

const home = mkdtempSync(join(tmpdir(), 'runlog-demo-'));
const piped = mkdtempSync(join(tmpdir(), 'runlog-demo-pipe-'));
afterAll(() => {
  rmSync(home, { recursive: true, force: true });
  rmSync(piped, { recursive: true, force: true });
});

describe('runlog demo (the first run)', () => {
  it('spawns the example app in both sandboxes and runs greet in both languages, then cleans up', async () => {
    await requireDocker();
    const r = spawnSync(
      process.execPath,
      cliArgs('demo', '--once', '--json', '--listen', '127.0.0.1:0', '--home', home),
      { encoding: 'utf8', timeout: 300_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.inspector).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/#token=[0-9a-f]{64}$/);
    expect(out.instances.map((i: any) => [i.sandbox, i.state])).toEqual([
      ['proot', 'running'],
      ['container', 'running'],
    ]);
    expect(out.executions.map((e: any) => [e.language, e.status, e.output?.greeting])).toEqual([
      ['node', 'succeeded', 'Hello, Ada!'],
      ['python', 'succeeded', 'Hello, Ada!'],
    ]);
    // A job from alice's repo, taken from the PDS's repo event stream and answered by the runner.
    expect(out.job).toMatchObject({ status: 'succeeded', output: { greeting: 'Hello, Grace!' } });
    expect(r.stderr).toContain('shutting down');
    // Nothing it started is left running.
    const left = await docker.listContainers({ filters: JSON.stringify({ label: [`runlog.home=${home}`] }) });
    expect(left).toEqual([]);
    const ps = spawnSync(process.execPath, cliArgs('ps', '--json', '--home', home), { encoding: 'utf8' });
    expect(JSON.parse(ps.stdout)).toEqual([]);
    const all = JSON.parse(
      spawnSync(process.execPath, cliArgs('ps', '--all', '--json', '--home', home), { encoding: 'utf8' }).stdout,
    );
    expect(all.map((a: any) => a.state).sort()).toEqual(['stopped', 'stopped', 'succeeded', 'succeeded', 'succeeded']);
  }, 320_000);

  it(
    'interrupted after the reader of its output has gone (`npm run demo | tee demo.log`, ' +
      'Ctrl-C), it still stops everything it started',
    async () => {
      await requireDocker();
      const child = spawn(process.execPath, cliArgs('demo', '--listen', '127.0.0.1:0', '--home', piped), {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
      await new Promise<void>((ready, fail) => {
        let out = '';
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          if (out.includes('Ctrl-C stops the demo')) ready();
        });
        void exited.then((code) => fail(new Error(`the demo exited (${code}) before it was running:\n${stderr}`)));
      });
      // The pipe's reader dies first (tee, on Ctrl-C), then the signals arrive: the terminal's SIGINT, npm's
      // forwarded one, and an impatient second Ctrl-C while it is stopping.
      // The second Ctrl-C goes once the demo has said it is still stopping (after npm's SIGTERM), not at a fixed
      // time: a shutdown quicker than that time would meet it after the stop, as the process's own exit tears down.
      child.stdout.destroy();
      let impatient = false;
      child.stderr.on('data', () => {
        if (!impatient && stderr.includes('SIGTERM: still stopping')) {
          impatient = true;
          child.kill('SIGINT');
        }
      });
      child.kill('SIGINT');
      setTimeout(() => child.kill('SIGTERM'), 50);
      expect(await exited, stderr).toBe(0);
      expect(impatient, stderr).toBe(true);
      expect(stderr).toContain('shutting down');
      expect(stderr).not.toMatch(/\n\s+at |EPIPE|Unhandled|uncaught/i);
      const left = await docker.listContainers({
        all: true,
        filters: JSON.stringify({ label: [`runlog.home=${piped}`] }),
      });
      expect(left).toEqual([]);
      const all = JSON.parse(
        spawnSync(process.execPath, cliArgs('ps', '--all', '--json', '--kind', 'instance', '--home', piped), {
          encoding: 'utf8',
        }).stdout,
      );
      expect(all.map((a: any) => a.state)).toEqual(['stopped', 'stopped']);
    },
    320_000,
  );
});
