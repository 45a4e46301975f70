// Where runlog keeps its files: $RUNLOG_HOME, else ~/.runlog. The log is <home>/runlog.db.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

export function defaultHome(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.RUNLOG_HOME || join(homedir(), '.runlog'));
}

export function resolvePaths(opts: { home?: string; db?: string } = {}): { home: string; db: string } {
  const home = resolve(opts.home ?? defaultHome());
  return { home, db: resolve(opts.db ?? join(home, 'runlog.db')) };
}
