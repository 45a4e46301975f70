// One fixture for cluster tests: real supervisors (`runlog serve --store postgres://… --node <name>`, each a process
// with a home of its own, as each host has) sharing one log in a schema of their own, on the shared PostgreSQL
// server (support/postgres.ts) or on a throwaway server of the test's own (support/pg-cluster.ts, for tests that
// stop or kill the server). Everything a cluster made is undone by cleanupClusters() (register it once per file:
// `afterAll(cleanupClusters)`): supervisors killed (woken first, if stopped), containers labelled with their homes
// removed, temp dirs and schemas dropped.
//
//   const cluster = await createCluster({ tag: 'fence', ttlMs: 5000 });
//   const a = await cluster.startNode('a');
//   cluster.cli(['spawn', …], a);            // a one-shot `runlog` on a's home
//   await cluster.sql('SELECT node FROM leases WHERE stream = $1', [stream]);
//   cluster.events(id); cluster.allEvents(); cluster.ps();
//   await cluster.containers({ 'runlog.stream': stream });
//   a.signal('SIGSTOP'); await a.stop();   // SIGTERM, resolves with the exit code
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { RecordedEvent } from '../../src/domain/events.ts';
import { runCli, startServe, type CliResult, type Served } from './cli-process.ts';
import { cleanupTestContainers, docker } from './docker.ts';
import { requirePostgres, testSchema } from './postgres.ts';

/** An event row as the cluster tests select it from the shared log. */
export interface ClusterEventRow {
  seq: number;
  stream: string;
  type: string;
  data: any;
  meta: any;
}

export interface ClusterOptions {
  /** Names the temp dir and the schema (`rltest_<tag>_…`). */
  tag: string;
  /** Every node's lease TTL (`--lease-ttl`), unless startNode is given another. */
  ttlMs: number;
  /** A PostgreSQL URL of the test's own (a throwaway server); default: the shared server (`npm run setup`'s). */
  url?: string;
}

export interface ClusterNode {
  name: string;
  home: string;
  served: Served;
  info: NonNullable<Served['info']>;
  /** The API's bearer token (the home's token file). */
  token: string;
  pid: number;
  /** Calls the node's HTTP API (JSON in, JSON out). */
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  signal(sig: NodeJS.Signals): void;
  /** SIGTERM, then its exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL, resolved once it has exited. */
  kill(): Promise<void>;
  alive(): boolean;
  stderr(): string;
}

export interface Cluster {
  root: string;
  schema: string;
  /** The --store URL of the cluster's log (its schema included). */
  store: string;
  /** `opts.env`: more environment for the supervisor (RUNLOG_FAULT…, supervisor/host/faults.ts). */
  startNode(
    name: string,
    extra?: string[],
    opts?: { ttlMs?: number; env?: Record<string, string> },
  ): Promise<ClusterNode>;
  /** One statement on the cluster's schema, on a connection of its own. */
  sql<R = any>(text: string, params?: unknown[]): Promise<R[]>;
  /** A one-shot `runlog …`: on a node's home, or with a home of no node's (reads through --store). */
  cli(args: string[], on?: ClusterNode, timeoutMs?: number): CliResult;
  /** `runlog events <id> --json` (every event of the actor), [] when it has none. */
  events(id: string): RecordedEvent[];
  /** `runlog events --all --json`. */
  allEvents(): RecordedEvent[];
  /** `runlog ps --all --json`. */
  ps(): any[];
  /** Containers (running or not) of this cluster's nodes with these labels as well. */
  containers(labels?: Record<string, string>): Promise<{ Id: string; State: string; Labels: Record<string, string> }[]>;
}

interface Made {
  nodes: ClusterNode[];
  homes: string[];
  root: string;
  url: string;
  schema: string;
}

const made: Made[] = [];

const alive = (s: Served) => s.child.exitCode === null && s.child.signalCode === null;

export async function createCluster(options: ClusterOptions): Promise<Cluster> {
  const url = options.url ?? (await requirePostgres());
  const root = mkdtempSync(join(tmpdir(), `runlog-${options.tag}-`));
  const schema = testSchema(options.tag);
  const store = `${url}?schema=${schema}`;
  const m: Made = { nodes: [], homes: [], root, url, schema };
  made.push(m);
  const nowhere = join(root, 'nowhere'); // a reader's home: one-shot commands that read through --store only
  const jsonLines = (r: CliResult, what: string): RecordedEvent[] => {
    if (r.code !== 0) throw new Error(`${what}: ${r.stderr}`);
    return r.stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as RecordedEvent);
  };
  const cli = (args: string[], on?: ClusterNode, timeoutMs = 120_000): CliResult =>
    runCli(args, on ? { home: on.home, timeoutMs } : { env: { RUNLOG_HOME: nowhere }, timeoutMs });
  return {
    root,
    schema,
    store,
    async startNode(name, extra = [], opts = {}) {
      const home = join(root, name);
      mkdirSync(home, { recursive: true, mode: 0o700 });
      if (!m.homes.includes(home)) m.homes.push(home);
      const s = await startServe(
        home,
        '127.0.0.1:0',
        ['--store', store, '--node', name, '--lease-ttl', String(opts.ttlMs ?? options.ttlMs), ...extra],
        opts.env,
      );
      if (!s.info) throw new Error(`runlog serve --node ${name} did not start:\n${s.stderr()}`);
      const info = s.info;
      const token = readFileSync(info.tokenFile, 'utf8').trim();
      const node: ClusterNode = {
        name,
        home,
        served: s,
        info,
        token,
        pid: info.pid,
        async api(method, path, body) {
          const r = await fetch(new URL(path, info.url), {
            method,
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          });
          const text = await r.text();
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON: the text as it is
          }
          return { status: r.status, body: parsed };
        },
        signal: (sig) => void s.child.kill(sig),
        async stop() {
          s.child.kill('SIGTERM');
          return s.exit;
        },
        async kill() {
          if (alive(s)) s.child.kill('SIGKILL');
          await s.exit;
        },
        alive: () => alive(s),
        stderr: () => s.stderr(),
      };
      m.nodes.push(node);
      return node;
    },
    async sql<R>(text: string, params: unknown[] = []) {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`SET search_path TO ${schema}`);
        return (await c.query(text, params)).rows as R[];
      } finally {
        await c.end();
      }
    },
    cli,
    events: (id) => {
      const r = cli(['events', id, '--json', '--store', store]);
      return r.code === 0 ? jsonLines(r, `events ${id}`) : [];
    },
    allEvents: () => jsonLines(cli(['events', '--all', '--json', '--store', store]), 'events --all'),
    ps() {
      const r = cli(['ps', '--all', '--json', '--store', store]);
      if (r.code !== 0) throw new Error(`ps failed: ${r.stderr}`);
      return JSON.parse(r.stdout);
    },
    async containers(labels = {}) {
      const extra = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
      const lists = await Promise.all(
        m.homes.map((h) =>
          docker.listContainers({ all: true, filters: JSON.stringify({ label: [`runlog.home=${h}`, ...extra] }) }),
        ),
      );
      return lists.flat() as never;
    },
  };
}

/** Undoes every cluster this file made: supervisors, containers, temp dirs, schemas. */
export async function cleanupClusters(): Promise<void> {
  for (const m of made.splice(0)) {
    for (const n of m.nodes) {
      if (!n.alive()) continue;
      n.signal('SIGCONT'); // one a test left stopped (SIGSTOP) is woken, as it would be by an operator
      n.signal('SIGKILL');
    }
    await Promise.all(m.nodes.map((n) => n.served.exit));
    for (const h of m.homes) await cleanupTestContainers({ 'runlog.home': h });
    rmSync(m.root, { recursive: true, force: true });
    const c = new pg.Client({ connectionString: m.url });
    try {
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${m.schema} CASCADE`);
    } catch {
      // a throwaway server already gone takes the schema with it
    } finally {
      await c.end().catch(() => undefined);
    }
  }
}
