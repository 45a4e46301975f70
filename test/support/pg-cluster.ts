// A throwaway PostgreSQL cluster of a test's own, for fault tests that stop and start the server: initdb and
// pg_ctl from Debian's PostgreSQL 15, run as the postgres user (runuser) in a temp directory, on a random
// loopback port, with its socket in that directory. The shared server on 5432 (support/postgres.ts) is never
// touched. Fails (never skips) when the binaries are missing, saying how to install them.
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PG_BIN = process.env.RUNLOG_PG_BIN ?? '/usr/lib/postgresql/15/bin';

export interface ThrowawayPostgres {
  /** postgres://runlog:<password>@127.0.0.1:<port>/runlog */
  url: string;
  port: number;
  dir: string;
  /** pg_ctl stop in that mode (fast: clients disconnected, clean shutdown; immediate: no shutdown, crash recovery at the next start). */
  stop(mode: 'fast' | 'immediate'): void;
  start(): void;
  /** start(), without blocking the caller's event loop (requests in flight meanwhile go on). */
  startAsync(): Promise<void>;
  /** pg_ctl restart in that mode: stopped and started again, clients cut off meanwhile (not blocking). */
  restart(mode: 'fast' | 'immediate'): Promise<void>;
  /**
   * kill -9 of the postmaster, as a crash would: its backends notice (they watch the postmaster) and exit; this
   * waits until every one of them is gone and nothing has the old shared memory segment attached (SIGKILL to any
   * still there after 10 s), and until the postmaster is reaped, since a new postmaster refuses to start while
   * either is there. postmaster.pid is left behind, stale, as after a
   * crash: pg_ctl start checks that its pid is dead and starts (crash recovery). Call start() afterwards.
   */
  killPostmaster(): Promise<void>;
  /** Whether postmaster.pid is there (a crash leaves it behind). */
  running(): boolean;
  destroy(): void;
}

function asPostgresAsync(args: string[], what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      'runuser',
      ['-u', 'postgres', '--', ...args],
      { encoding: 'utf8', timeout: 120_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${what} failed: ${stderr || stdout || err.message}`));
        else resolve();
      },
    );
  });
}

function asPostgres(args: string[], what: string): string {
  const r = spawnSync('runuser', ['-u', 'postgres', '--', ...args], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`${what} failed (${r.status}): ${r.stderr || r.stdout || r.error?.message}`);
  return r.stdout;
}

export function startThrowawayPostgres(): ThrowawayPostgres {
  if (!existsSync(join(PG_BIN, 'initdb')))
    throw new Error(`${PG_BIN}/initdb is missing: run \`npm run setup\` (it installs Debian's postgresql 15)`);
  const dir = mkdtempSync(join(tmpdir(), 'runlog-pgfault-'));
  const pgUid = Number(asPostgresId('-u'));
  const pgGid = Number(asPostgresId('-g'));
  chownSync(dir, pgUid, pgGid);
  const data = join(dir, 'data');
  const sock = join(dir, 'sock');
  mkdirSync(sock, { mode: 0o700 });
  chownSync(sock, pgUid, pgGid);
  // A random high port; a clash makes pg_ctl start fail (the test then fails saying so).
  const port = 20_000 + Math.floor(Math.random() * 40_000);
  // Local (socket) connections trust the postgres user only: the socket directory is the postgres user's, 0700.
  asPostgres(
    [
      join(PG_BIN, 'initdb'),
      '-D',
      data,
      '-U',
      'postgres',
      '--auth-local=trust',
      '--auth-host=scram-sha-256',
      '--no-sync',
    ],
    'initdb',
  );
  const opts = `-p ${port} -k ${sock} -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on`;
  const startArgs = [
    join(PG_BIN, 'pg_ctl'),
    '-D',
    data,
    '-o',
    opts,
    '-l',
    join(dir, 'server.log'),
    '-w',
    '-t',
    '60',
    'start',
  ];
  // A failed start says why: pg_ctl only says "Examine the log output", so its tail goes into the error.
  const withLog = (err: unknown): never => {
    let tail = '';
    try {
      tail = readFileSync(join(dir, 'server.log'), 'utf8').split('\n').slice(-15).join('\n');
    } catch {
      tail = '(no server.log)';
    }
    throw new Error(`${(err as Error).message}\nserver.log:\n${tail}`);
  };
  const start = (): void => {
    try {
      asPostgres(startArgs, 'pg_ctl start');
    } catch (err) {
      withLog(err);
    }
  };
  start();
  const password = randomBytes(12).toString('hex');
  asPostgres(
    [
      'psql',
      '-h',
      sock,
      '-p',
      String(port),
      '-U',
      'postgres',
      '-v',
      'ON_ERROR_STOP=1',
      '-c',
      `CREATE ROLE runlog LOGIN PASSWORD '${password}'`,
      '-c',
      'CREATE DATABASE runlog OWNER runlog',
    ],
    'psql',
  );
  let destroyed = false;
  return {
    url: `postgres://runlog:${password}@127.0.0.1:${port}/runlog`,
    port,
    dir,
    stop(mode) {
      asPostgres([join(PG_BIN, 'pg_ctl'), '-D', data, '-m', mode, '-w', '-t', '60', 'stop'], `pg_ctl stop -m ${mode}`);
    },
    start,
    startAsync: () => asPostgresAsync(startArgs, 'pg_ctl start').catch(withLog),
    restart(mode) {
      return asPostgresAsync(
        [
          join(PG_BIN, 'pg_ctl'),
          '-D',
          data,
          '-m',
          mode,
          '-o',
          opts,
          '-l',
          join(dir, 'server.log'),
          '-w',
          '-t',
          '60',
          'restart',
        ],
        `pg_ctl restart -m ${mode}`,
      ).catch(withLog);
    },
    async killPostmaster() {
      const lock = readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n');
      const pid = Number(lock[0]);
      if (!Number.isInteger(pid) || pid <= 1) throw new Error(`postmaster.pid of ${data} names no process`);
      // Line 7: the SysV segment's key and id. A new postmaster refuses to start while anything still has that
      // segment attached, so that, not the children listed below, is what this waits on: a backend forked for a
      // connection between the ps and the kill is in no list, yet holds the segment until it notices.
      const [shmKey, shmId] = (lock[6] ?? '').trim().split(/\s+/).map(Number);
      // Its children (backends, checkpointer, walwriter, …) by parent, taken before the kill re-parents them.
      const ps = spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' });
      const children = ps.stdout
        .split('\n')
        .map((l) => Number(l.trim()))
        .filter((n) => n > 0);
      process.kill(pid, 'SIGKILL');
      // Gone, or a zombie its new parent has not reaped yet (it holds nothing any more).
      const gone = (p: number) => {
        try {
          return /^State:\s+Z/m.test(readFileSync(`/proc/${p}/status`, 'utf8'));
        } catch {
          return true;
        }
      };
      // The postmaster itself must be reaped, not just dead: the new one takes a zombie's pid in postmaster.pid
      // for a live server (kill(pid, 0) succeeds) and refuses to start. Its new parent, PID 1, reaps when it gets
      // round to it, up to 2 s later on this machine kind.
      const reaped = () => !existsSync(`/proc/${pid}`);
      const detached = () => shmId === undefined || !Number.isInteger(shmId) || shmAttachments(shmId) === 0;
      const deadline = Date.now() + 10_000;
      while (!(reaped() && children.every(gone) && detached())) {
        if (Date.now() > deadline) {
          for (const c of children) if (!gone(c)) process.kill(c, 'SIGKILL');
          if (shmKey !== undefined) for (const p of processesMapping(shmKey)) if (!gone(p)) process.kill(p, 'SIGKILL');
        }
        if (Date.now() > deadline + 20_000) {
          throw new Error(
            `after kill -9 of postmaster ${pid}, 30 s on: ` +
              `${reaped() ? '' : 'it is not reaped yet (PID 1 reaps orphans here); '}` +
              `${detached() ? '' : `its shared memory (id ${shmId}) is still attached; `}` +
              `see ${join(dir, 'server.log')}`,
          );
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    running: () => existsSync(join(data, 'postmaster.pid')),
    destroy() {
      if (destroyed) return;
      destroyed = true;
      if (existsSync(join(data, 'postmaster.pid')))
        spawnSync(
          'runuser',
          ['-u', 'postgres', '--', join(PG_BIN, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'],
          { timeout: 60_000 },
        );
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** How many processes have the SysV shared memory segment shmid attached (0 when it is gone): /proc/sysvipc/shm. */
function shmAttachments(shmid: number): number {
  for (const line of readFileSync('/proc/sysvipc/shm', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (Number(f[1]) === shmid) return Number(f[6]);
  }
  return 0;
}

/** The processes that have the SysV segment with this key mapped ("/SYSV<key in hex>" in /proc/<pid>/maps). */
function processesMapping(key: number): number[] {
  const name = `/SYSV${key.toString(16).padStart(8, '0')}`;
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/maps`, 'utf8').includes(name)) found.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

function asPostgresId(flag: '-u' | '-g'): string {
  const r = spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error("there is no postgres user: run `npm run setup` (it installs Debian's postgresql 15)");
  return r.stdout.trim();
}
