// The LISTEN connection of a cluster node's follow bus (store/postgres/follow-channel.ts) is ended by close()
// whatever state it is in, so a supervisor's process can exit after `runlog serve` shuts down: connected, being
// made (the first connect, or the reconnect after a break). Against a loopback stand-in for PostgreSQL
// (support/fake-pg.ts) that can hold a connect pending. Before the fix, a connect still out at close() was made
// afterwards and held open for good (the process never exited), and its listen() never settled.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PgFollowBus } from '../../../src/store/postgres/follow-channel.ts';
import { startFakePg, type FakePg } from '../../support/fake-pg.ts';

let fake: FakePg | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function until(what: string, check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** How a promise settled within `ms`: 'pending' if it had not. */
async function settled(p: Promise<unknown>, ms = 3000): Promise<'resolved' | 'pending' | Error> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p.then(
        () => 'resolved' as const,
        (err: unknown) => err as Error,
      ),
      new Promise<'pending'>((r) => (timer = setTimeout(() => r('pending'), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const bus = (url: string, logged: string[] = []) =>
  new PgFollowBus({ url, sql: async () => undefined, log: (m) => logged.push(m) });

describe('PgFollowBus close', () => {
  it('ends a connected LISTEN connection', async () => {
    fake = await startFakePg();
    const b = bus(fake.url);
    const off = await b.listen('rlfc_x', () => undefined);
    expect(fake.open()).toBe(1);
    off();
    b.close();
    await until('the connection closed', () => fake!.open() === 0);
  });

  it('closed while its connection is being made: listen() is refused at once and the connection is not kept', async () => {
    fake = await startFakePg();
    fake.answer = false; // the server holds the start-up: the connect stays out
    const b = bus(fake.url);
    const listening = b.listen('rlfc_x', () => undefined);
    await until('the connect is out', () => fake!.accepted === 1);
    b.close();
    const outcome = await settled(listening);
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toMatch(/closed/);
    await until('the connection closed', () => fake!.open() === 0);
    // The server answering now finds nobody: nothing is connected again.
    fake.answer = true;
    await new Promise((r) => setTimeout(r, 100));
    expect(fake.open()).toBe(0);
    expect(fake.accepted).toBe(1);
  });

  it('closed while it reconnects after a break: the new connection is not kept', async () => {
    fake = await startFakePg();
    const logged: string[] = [];
    const b = bus(fake.url, logged);
    await b.listen('rlfc_control', () => undefined); // a control channel: listened on again after a break
    fake.answer = false;
    fake.dropAll();
    await until('the reconnect is out', () => fake!.accepted === 2);
    expect(logged.join('\n')).toContain('LISTEN connection broke');
    b.close();
    await until('the connection closed', () => fake!.open() === 0);
    fake.answer = true;
    await new Promise((r) => setTimeout(r, 1200)); // past the retry delay: no third connection either
    expect(fake.open()).toBe(0);
    expect(fake.accepted).toBe(2);
  });

  it('a process whose bus is closed while connecting exits on its own', async () => {
    fake = await startFakePg();
    fake.answer = false;
    // The child listens, closes once the connect is out, and has nothing else to do: it must end by itself.
    const script = `
      import { PgFollowBus } from ${JSON.stringify(join(import.meta.dirname, '../../../src/store/postgres/follow-channel.ts'))};
      const bus = new PgFollowBus({ url: process.argv[1], sql: async () => undefined, log: () => undefined });
      bus.listen('rlfc_x', () => undefined).catch(() => process.stderr.write('refused\\n'));
      setTimeout(() => bus.close(), 200);
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, fake.url], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await until('the connect is out', () => fake!.accepted === 1, 10_000);
    const outcome = await settled(exited, 8000);
    if (outcome === 'pending') child.kill('SIGKILL');
    expect(outcome, err).toBe('resolved');
    expect(await exited).toBe(0);
    expect(err).toContain('refused');
  });

  it('a listen after close is refused', async () => {
    fake = await startFakePg();
    const b = bus(fake.url);
    b.close();
    await expect(b.listen('rlfc_x', () => undefined)).rejects.toThrow(/closed/);
    expect(fake.accepted).toBe(0);
  });
});
