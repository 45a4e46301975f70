// Drives test/fixtures/supervisor-child.ts: a supervisor in its own process, so a test can SIGKILL it (or let
// RUNLOG_FAULT make it kill itself) and then recover on the same home. Everything the child acknowledged
// (`committed` lines) is kept, so the test can check it is still in the log afterwards.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

const FIXTURE = resolve(import.meta.dirname, '../fixtures/supervisor-child.ts');
const HELLO = resolve(import.meta.dirname, '../../examples/hello-app');

export interface ChildConfig {
  home: string;
  labels?: Record<string, string>;
  network?: string;
  portRange?: { min: number; max: number };
  plcUrl?: string;
  healthTimeoutMs?: number;
  killGraceMs?: number;
  /** Run the Docker engine-events watcher (reconnect + reconcile after a daemon restart). */
  engineWatch?: boolean;
  /** Take jobs from this repo event stream as the runner account signed in with these credentials. */
  jobs?: { from: string; pdsUrl: string; identifier: string; password: string; cursorEveryMs?: number };
}

export interface Committed {
  stream: string;
  version: number;
  eventType: string;
  seq: number;
}

export class ChildDiedError extends Error {
  constructor(
    readonly signal: NodeJS.Signals | null,
    readonly code: number | null,
    stderr: string,
  ) {
    super(`the child supervisor died (${signal ?? `exit ${code}`}) before answering\n${stderr.slice(-2000)}`);
  }
}

export interface ChildSupervisor {
  readonly pid: number;
  readonly committed: Committed[];
  readonly engine: Record<string, unknown>[];
  stderr(): string;
  /** true once the child said ready; false when it died first. */
  readonly ready: Promise<boolean>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  request<T = any>(op: string, args?: Record<string, unknown>): Promise<T>;
  /** Sends a request without waiting (the child may die on the way: that is the point). */
  send(op: string, args?: Record<string, unknown>): Promise<unknown>;
  sigkill(): Promise<void>;
  alive(): boolean;
}

export function startChild(config: ChildConfig, env: Record<string, string> = {}): ChildSupervisor {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', FIXTURE, JSON.stringify(config)], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, RUNLOG_FAULT: '', RUNLOG_FAULT_EVENT: '', ...env },
  });
  const committed: Committed[] = [];
  const engine: Record<string, unknown>[] = [];
  let errText = '';
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let dead = false;
  let readyResolve!: (v: boolean) => void;
  const ready = new Promise<boolean>((r) => (readyResolve = r));
  child.stderr!.on('data', (b: Buffer) => (errText += b.toString()));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let msg: Record<string, any>;
    try {
      msg = JSON.parse(line);
    } catch {
      return; // a torn last line of a killed child
    }
    if (msg.type === 'committed')
      committed.push({ stream: msg.stream, version: msg.version, eventType: msg.eventType, seq: msg.seq });
    else if (msg.type === 'ready') readyResolve(true);
    else if (msg.type === 'engine') engine.push(msg);
    else if (msg.type === 'reply') {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (!p) return;
      if (msg.ok) p.resolve(msg.value);
      else p.reject(Object.assign(new Error(`${msg.error.code}: ${msg.error.message}`), { code: msg.error.code }));
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.on('exit', (code, signal) => {
      dead = true;
      readyResolve(false);
      // Let the last stdout lines arrive before failing what is pending.
      setTimeout(() => {
        for (const p of pending.values()) p.reject(new ChildDiedError(signal, code, errText));
        pending.clear();
        resolveExit({ code, signal });
      }, 50);
    });
  });
  child.stdin!.on('error', () => undefined);
  const send = (op: string, args: Record<string, unknown> = {}) => {
    const id = nextId++;
    const p = new Promise<unknown>((res, rej) => pending.set(id, { resolve: res, reject: rej }));
    if (!dead) child.stdin!.write(`${JSON.stringify({ id, op, ...args })}\n`);
    else queueMicrotask(() => pending.get(id)?.reject(new ChildDiedError(null, null, errText)));
    return p;
  };
  return {
    pid: child.pid!,
    committed,
    engine,
    stderr: () => errText,
    ready,
    exited,
    request: <T>(op: string, args?: Record<string, unknown>) => send(op, args) as Promise<T>,
    send: (op, args) => {
      const p = send(op, args);
      p.catch(() => undefined);
      return p;
    },
    async sigkill() {
      if (!dead) child.kill('SIGKILL');
      await exited;
    },
    alive: () => !dead,
  };
}

/** A copy of hello-app with manifest overrides, in a directory of its own under `root`. */
export function helloApp(root: string, overrides: Record<string, unknown>): string {
  const dir = mkdtempSync(join(root, 'app-'));
  cpSync(HELLO, dir, { recursive: true, dereference: true });
  const base = JSON.parse(readFileSync(join(HELLO, 'runlog.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'runlog.json'), JSON.stringify({ ...base, ...overrides }, null, 2));
  return dir;
}

/** A runlog home `root/name` holding the given operator policy (operator-policy.json). */
export function homeWithPolicy(root: string, name: string, policy: string): string {
  const home = join(root, name);
  mkdirSync(home, { recursive: true });
  writeFileSync(join(home, 'operator-policy.json'), policy);
  return home;
}
