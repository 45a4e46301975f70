// Starts bench/pds-child.ts (the embedded PDS + PLC in a child process) and talks to it over HTTP only: accounts
// are created through the PDS's XRPC, publishers sign in as any client would. Same shape as the in-process one.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { createLocalAccount, type LocalNetwork } from '../src/adapters/atproto/local-network.ts';

const CHILD = resolve(import.meta.dirname, 'pds-child.ts');

export async function startPdsProcess(): Promise<LocalNetwork> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const urls = await new Promise<{ pdsUrl: string; plcUrl: string }>((ok, fail) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once('line', (line) => ok(JSON.parse(line) as { pdsUrl: string; plcUrl: string }));
    child.once('exit', (code, signal) =>
      fail(
        new Error(
          `the PDS process ended (${signal ?? `exit ${code}`}) before listening; run \`npm run setup\`\n${stderr}`,
        ),
      ),
    );
  });
  const { pdsUrl, plcUrl } = urls;
  return {
    pdsUrl,
    plcUrl,
    createAccount: (handle) => createLocalAccount(pdsUrl, handle),
    setPdsEndpoint() {
      return Promise.reject(new Error('setPdsEndpoint: not available on the PDS process'));
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin!.end();
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}
