// `runlog` as a user runs it: real processes (serve in the background, one-shot commands), from the sources
// through tsx like every CLI test (support/cli.ts), never a stale dist/.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cliArgs, REPO as REPO_ROOT } from './cli.ts';

export { REPO_ROOT };

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs one `runlog …` to its end. `user` runs it through setpriv as that uid/gid (no supplementary groups). */
export function runCli(
  args: string[],
  opts: { home?: string; user?: number; env?: Record<string, string>; timeoutMs?: number } = {},
): CliResult {
  const env = { ...process.env, ...(opts.home ? { RUNLOG_HOME: opts.home } : {}), ...opts.env };
  const [file, argv] =
    opts.user === undefined
      ? [process.execPath, cliArgs(...args)]
      : [
          '/usr/bin/setpriv',
          [`--reuid=${opts.user}`, `--regid=${opts.user}`, '--clear-groups', process.execPath, ...cliArgs(...args)],
        ];
  const r = spawnSync(file, argv, { cwd: REPO_ROOT, env, encoding: 'utf8', timeout: opts.timeoutMs ?? 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export interface Served {
  child: ChildProcess;
  /** What `serve --json` printed, or null when it exited first. */
  info: { url: string; host: string; port: number; home: string; db: string; tokenFile: string; pid: number } | null;
  stderr(): string;
  /** stdout and stderr together (where a --json error lands is the CLI's choice; the test only needs its text). */
  output(): string;
  exit: Promise<number | null>;
}

/** Starts `runlog serve --json --listen <listen>` and waits until it prints its address or exits. */
export async function startServe(
  home: string,
  listen = '127.0.0.1:0',
  extra: string[] = [],
  env: Record<string, string> = {},
): Promise<Served> {
  const child = spawn(process.execPath, cliArgs('serve', '--listen', listen, '--json', '--home', home, ...extra), {
    cwd: REPO_ROOT,
    env: { ...process.env, RUNLOG_HOME: home, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const info = await new Promise<Served['info']>((resolve) => {
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString();
      try {
        const doc = JSON.parse(stdout) as Record<string, unknown>;
        if (typeof doc.url === 'string') resolve(doc as NonNullable<Served['info']>); // else an error document: wait for the exit
      } catch {
        // not complete yet
      }
    });
    void exit.then(() => resolve(null));
  });
  return { child, info, stderr: () => stderr, output: () => `${stdout}\n${stderr}`, exit };
}
