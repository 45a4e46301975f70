// `runlog runner keys` and `runlog secrets seal` in process: the key ring in --home, rotation's refusals, an
// insecure ring refused with its code, and seal's argument checks, which never echo a value. (Sealing against a
// real PDS is test/int/atproto/sealed-secrets.test.ts.)
import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.ts';
import { capture } from '../../support/cli-in-process.ts';
import { freshDirs } from '../../support/tmp.ts';

const dirs = freshDirs('runlog-secrets-cli-');

async function run(...argv: string[]) {
  const c = capture();
  const code = await main(argv, c.factory);
  return { code, out: c.stdout(), err: c.stderr() };
}

describe('runlog runner keys', () => {
  it('lists the current key, created in the home on first use', async () => {
    const home = dirs();
    const first = await run('runner', 'keys', 'list', '--home', home);
    expect(first.code).toBe(0);
    expect(first.out).toMatch(/PUBLIC KEY\s+CREATED\s+RETIRES/);
    expect(first.out).toMatch(/did:key:z6LS\S+\s+\S+\s+current/);
    const json = await run('runner', 'keys', 'list', '--home', home, '--json');
    const keys = (JSON.parse(json.out) as { keys: { publicKey: string; current: boolean }[] }).keys;
    expect(keys).toHaveLength(1);
    expect(first.out).toContain(keys[0]!.publicKey);
    expect(json.out).not.toContain('privateKey');
  });

  it('rotates to a new key and lists the old one with its retire date', async () => {
    const home = dirs();
    const before = await run('runner', 'keys', 'list', '--home', home, '--json');
    const old = (JSON.parse(before.out) as { keys: { publicKey: string }[] }).keys[0]!.publicKey;
    const rotated = await run('runner', 'keys', 'rotate', '--retire-old-at', '2999-01-01T00:00:00Z', '--home', home);
    expect(rotated.code).toBe(0);
    expect(rotated.out).toMatch(/^did:key:z6LS/);
    expect(rotated.out).not.toBe(old);
    expect(rotated.err).toContain(`${old} opens secrets until 2999-01-01T00:00:00.000Z`);
    const after = await run('runner', 'keys', 'list', '--home', home);
    expect(after.out).toMatch(new RegExp(`${old}\\s+\\S+\\s+2999-01-01T00:00:00.000Z`));
    expect(after.out).toMatch(new RegExp(`${rotated.out}\\s+\\S+\\s+current`));
  });

  it('refuses a rotation without a future retire date, and a bad subcommand, as usage errors', async () => {
    const home = dirs();
    expect((await run('runner', 'keys', 'rotate', '--home', home)).code).toBe(2);
    const past = await run(
      'runner',
      'keys',
      'rotate',
      '--retire-old-at',
      '2001-01-01T00:00:00Z',
      '--home',
      home,
      '--json',
    );
    expect(past.code).toBe(2);
    expect(past.err).toContain('KEY_RETIRE_INVALID');
    expect((await run('runner', 'keys', 'delete', '--home', home)).code).toBe(2);
  });

  it('refuses a key ring others can read, with its code', async () => {
    const home = dirs();
    await run('runner', 'keys', 'list', '--home', home);
    chmodSync(join(home, 'runner-keys.json'), 0o644);
    const r = await run('runner', 'keys', 'list', '--home', home, '--json');
    expect(r.code).toBe(1);
    expect(r.err).toContain('RUNNER_KEYS_INSECURE');
  });
});

describe('runlog secrets seal', () => {
  it('needs --runner and at least one secret', async () => {
    expect((await run('secrets', 'seal', 'A=b')).code).toBe(2);
    expect((await run('secrets', 'seal', '--runner', 'did:plc:abc')).code).toBe(2);
    expect((await run('secrets', 'open', '--runner', 'did:plc:abc', 'A=b')).code).toBe(2);
  });

  it('refuses an argument that is not NAME=value without echoing it', async () => {
    const r = await run('secrets', 'seal', '--runner', 'did:plc:abc', 'OK=1', 'hunter2-not-an-assignment');
    expect(r.code).toBe(2);
    expect(r.err).toContain('argument 3 is not NAME=value');
    expect(r.err).not.toContain('hunter2');
  });

  it('refuses --from-env of a variable the environment does not have', async () => {
    const r = await run('secrets', 'seal', '--runner', 'did:plc:abc', '--from-env', 'RUNLOG_TEST_SURELY_UNSET_VAR');
    expect(r.code).toBe(2);
    expect(r.err).toContain('the environment has no RUNLOG_TEST_SURELY_UNSET_VAR');
  });
});
