// The egress proxy as its image runs it: `node main.ts` under plain Node (no tsx), its settings from the
// environment and a token file, its control API on loopback, one grant through it, and a clean exit on SIGTERM.
// Its log says where it listens and never the token.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { egressControl } from '../../../src/adapters/egress/control-client.ts';
import { freshDirs } from '../../support/tmp.ts';

const MAIN = join(import.meta.dirname, '../../../src/adapters/egress/proxy/main.ts');
const dirs = freshDirs('runlog-egress-main-');

/** A free loopback port (closed again at once; the proxy takes it next). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen({ host: '127.0.0.1', port: 0 }, resolve));
  const { port } = s.address() as { port: number };
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('the egress proxy process', () => {
  it('starts under node alone, serves its control API, and exits 0 on SIGTERM', async () => {
    const token = randomBytes(24).toString('hex');
    const tokenFile = join(dirs(), 'token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const port = await freePort();
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    const child = spawn(process.execPath, [MAIN, '--proxy-port', '0', '--dns-port', '0'], {
      env: {
        ...env,
        EGRESS_CONTROL: `127.0.0.1:${port}`,
        EGRESS_RESOLVER: '127.0.0.1:1',
        EGRESS_TOKEN_FILE: tokenFile,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await expect.poll(() => log, { timeout: 15_000 }).toContain('"event":"listening"');
      const control = egressControl({ baseUrl: `http://127.0.0.1:${port}`, token });
      expect(await control.health()).toBe(true);
      const grant = {
        destinations: [{ host: 'api.test', ports: [80] }],
        allowRanges: [],
        limits: { bytes: 1000, seconds: 60, connections: 1 },
      };
      const registered = await control.putGrant('exec-main', '127.0.0.2', grant);
      expect(registered).toMatchObject({ key: 'exec-main', address: '127.0.0.2' });
      expect(registered.proxyPort).toBeGreaterThan(0);
      await expect(
        egressControl({ baseUrl: `http://127.0.0.1:${port}`, token: 'x'.repeat(48) }).grants(),
      ).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(log).toContain('"event":"stopping"');
    expect(log).not.toContain(token);
  });

  it('refuses to start without a resolver or a token, saying why', async () => {
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    delete env.EGRESS_TOKEN;
    delete env.EGRESS_RESOLVER;
    const child = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    expect(await new Promise((resolve) => child.on('exit', resolve))).toBe(2);
    expect(log).toContain('EGRESS_RESOLVER (--resolver) is required');
    expect(log).toContain('the control token');
  });
});
