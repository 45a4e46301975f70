// The bearer token goes only where this user said: server.json is trusted only when it is a regular file of this
// user's, writable by no one else, naming a loopback IP. Each attack points server.json at a listener this test
// runs and checks that the token never arrives; a control shows the same listener does receive it from a
// legitimate file. `serve` refuses a home others can write to.
import { chmodSync, chownSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.ts';
import { ensureToken } from '../../../src/server/token.ts';
import { tempDir } from '../../support/tmp.ts';
import { capture } from '../../support/cli-in-process.ts';
import { runCli } from '../../support/cli-process.ts';

const NOBODY = 65534;
let listener: Server;
let port: number;
const seen: { auth: string | undefined; url: string | undefined }[] = [];

beforeAll(async () => {
  listener = createServer((req, res) => {
    seen.push({ auth: req.headers.authorization, url: req.url });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'x', kind: 'instance', state: 'stopped', context: {} }));
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  port = (listener.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => listener.close(() => r())));

function home(): { dir: string; token: string } {
  const dir = join(tempDir(), 'home');
  mkdirSync(dir, { mode: 0o700 });
  return { dir, token: ensureToken(dir).token };
}

const info = (url: string) => `${JSON.stringify({ url, pid: process.pid })}\n`;

async function stop(dir: string): Promise<{ code: number; text: string }> {
  const c = capture();
  const code = await main(['stop', 'x', '--home', dir], c.factory);
  return { code, text: c.text() };
}

describe('server.json trust', () => {
  it('control: a server.json of this user, 0600, on 127.0.0.1 does get the token', async () => {
    const h = home();
    writeFileSync(join(h.dir, 'server.json'), info(`http://127.0.0.1:${port}/`), { mode: 0o600 });
    seen.length = 0;
    const r = await stop(h.dir);
    expect(r.code, r.text).toBe(0);
    expect(seen).toEqual([{ auth: `Bearer ${h.token}`, url: '/api/actors/x/stop' }]);
  });

  const attacks: [string, (dir: string) => void][] = [
    [
      'owned by another user (written into a world-writable home)',
      (dir) => {
        chmodSync(dir, 0o777);
        writeFileSync(join(dir, 'server.json'), info(`http://127.0.0.1:${port}/`), { mode: 0o600 });
        chownSync(join(dir, 'server.json'), NOBODY, NOBODY);
      },
    ],
    [
      'writable by others',
      (dir) => {
        writeFileSync(join(dir, 'server.json'), info(`http://127.0.0.1:${port}/`), { mode: 0o600 });
        chmodSync(join(dir, 'server.json'), 0o666);
      },
    ],
    [
      'writable by the group',
      (dir) => {
        writeFileSync(join(dir, 'server.json'), info(`http://127.0.0.1:${port}/`), { mode: 0o600 });
        chmodSync(join(dir, 'server.json'), 0o620);
      },
    ],
    [
      'a symlink to a file of this user',
      (dir) => {
        writeFileSync(join(dir, 'elsewhere.json'), info(`http://127.0.0.1:${port}/`), { mode: 0o600 });
        symlinkSync(join(dir, 'elsewhere.json'), join(dir, 'server.json'));
      },
    ],
    [
      'naming a host name, not a loopback IP',
      (dir) => writeFileSync(join(dir, 'server.json'), info(`http://localhost:${port}/`), { mode: 0o600 }),
    ],
    [
      'naming a non-loopback address',
      (dir) => writeFileSync(join(dir, 'server.json'), info(`http://10.0.0.1:${port}/`), { mode: 0o600 }),
    ],
    [
      'naming another scheme',
      (dir) => writeFileSync(join(dir, 'server.json'), info(`https://127.0.0.1:${port}/`), { mode: 0o600 }),
    ],
  ];
  for (const [name, plant] of attacks) {
    it(`refuses a server.json ${name}: the token is not sent`, async () => {
      const h = home();
      plant(h.dir);
      seen.length = 0;
      const r = await stop(h.dir);
      expect(r.code).not.toBe(0);
      expect(r.text).toContain('SERVER_INFO_UNTRUSTED');
      expect(r.text).not.toContain(h.token);
      expect(seen).toEqual([]);
    });
  }

  it('refuses a token file of another user', async () => {
    const h = home();
    writeFileSync(join(h.dir, 'server.json'), info(`http://127.0.0.1:${port}/`), { mode: 0o600 });
    chownSync(join(h.dir, 'token'), NOBODY, NOBODY);
    seen.length = 0;
    const r = await stop(h.dir);
    expect(r.text).toContain('SERVER_INFO_UNTRUSTED');
    expect(seen).toEqual([]);
  });

  it('ignores a stale server.json (its process is gone): no supervisor, nothing sent', async () => {
    const h = home();
    writeFileSync(
      join(h.dir, 'server.json'),
      `${JSON.stringify({ url: `http://127.0.0.1:${port}/`, pid: 2 ** 22 + 7 })}\n`,
      { mode: 0o600 },
    );
    seen.length = 0;
    const r = await stop(h.dir);
    expect(r.text).toContain('NO_SUPERVISOR');
    expect(seen).toEqual([]);
  });
});

describe('a supervisor that is not one, or not reachable by this user', () => {
  let other: Server;
  let otherUrl: string;
  beforeAll(async () => {
    // Another program on the port server.json names: JSON that is no runlog view, HTML, an error without runlog's shape.
    other = createServer((req, res) => {
      if (req.url?.endsWith('/stop')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"hello":"world"}');
      } else if (req.url?.endsWith('/kill')) {
        res.writeHead(404, { 'content-type': 'text/html' });
        res.end('<h1>Not Found</h1>');
      } else if (req.method === 'DELETE') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            appId: 'com.example.hello',
            tool: 'git',
            granted: false,
            tools: [],
            instances: ['inst_a'],
            changed: [{ instanceId: 'inst_a', node: '' }],
            pending: [],
          }),
        );
      } else {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end('{"message":"forbidden"}');
      }
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise<void>((r) => other.close(() => r())));

  it('a trusted server.json naming a server that is not a runlog supervisor gives BAD_RESPONSE saying so', async () => {
    const h = home();
    writeFileSync(join(h.dir, 'server.json'), info(otherUrl), { mode: 0o600 });
    for (const args of [
      ['stop', 'x'],
      ['kill', 'x'],
      ['cap', 'grant', 'com.example.hello', 'git'],
    ]) {
      const c = capture();
      expect(await main([...args, '--json', '--home', h.dir], c.factory), args.join(' ')).toBe(1);
      const { error } = JSON.parse(c.stderr());
      expect(error.code, args.join(' ')).toBe('BAD_RESPONSE');
      expect(error.message, args.join(' ')).toContain(`the server at ${otherUrl} is not a runlog supervisor`);
    }
  });

  it('cap revoke says later spawns start without the tool (not that they get it)', async () => {
    const h = home();
    writeFileSync(join(h.dir, 'server.json'), info(otherUrl), { mode: 0o600 });
    const c = capture();
    expect(await main(['cap', 'revoke', 'com.example.hello', 'git', '--home', h.dir], c.factory)).toBe(0);
    expect(c.stderr()).toBe(
      'runlog: revoked git for app com.example.hello: 1 running instance changed (inst_a); later spawns of the app start without it',
    );
  });

  it(
    "another user's CLI on a home it cannot read is told so (PERMISSION_DENIED), not that no supervisor runs",
    { timeout: 60_000 },
    () => {
      const parent = tempDir();
      chmodSync(parent, 0o755); // nobody reaches the home's directory, not into it (0700, root's)
      const dir = join(parent, 'home');
      mkdirSync(dir, { mode: 0o700 });
      ensureToken(dir);
      writeFileSync(join(dir, 'server.json'), info(`http://127.0.0.1:${port}/`), { mode: 0o600 });
      const r = runCli(['stop', 'x', '--json', '--home', dir], { user: NOBODY, env: { HOME: '/nonexistent' } });
      expect(r.code, r.stderr).toBe(1);
      const { error } = JSON.parse(r.stderr);
      expect(error.code).toBe('PERMISSION_DENIED');
      expect(error.message).toContain(`cannot reach the supervisor's files in ${dir}`);
      expect(error.message).toContain('belongs to uid 0');
    },
  );
});

describe('serve and the home directory', () => {
  for (const m of [0o777, 0o770, 0o757]) {
    it(`refuses a home with mode 0${m.toString(8)} before creating anything in it`, async () => {
      const dir = join(tempDir(), 'home');
      mkdirSync(dir);
      chmodSync(dir, m);
      const c = capture();
      expect(await main(['serve', '--listen', '127.0.0.1:0', '--home', dir], c.factory)).not.toBe(0);
      expect(c.text()).toContain('HOME_INSECURE');
      for (const f of ['runlog.db', 'runlog.db.lock', 'token', 'server.json'])
        expect(existsSync(join(dir, f))).toBe(false);
    });
  }
});
