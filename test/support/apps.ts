// Test support for the sandbox runners: the real parts they need (fail loudly when missing — never skip),
// temporary runlog homes and app workspaces, the hello-app example installed into a workspace, and
// cleanup of what a test created in Docker.

import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type Docker from 'dockerode';
import { httpRequest } from '../../src/adapters/health/http.ts';
import { parseManifest, type AppManifest } from '../../src/domain/manifest.ts';
import { docker, requireDocker, SETUP_DIR } from './docker.ts';

export const REPO = resolve(import.meta.dirname, '../..');
export const HELLO_APP_DIR = join(REPO, 'examples/hello-app');
export const HELLO_APP_ID = 'com.example.hello';
export const ROOTFS = process.env.RUNLOG_ROOTFS ?? join(SETUP_DIR, 'rootfs/debian-bookworm');
export { DOCKER_SOCKET } from './docker.ts';

const setupHint = "run 'npm run setup' (scripts/setup.sh) to start it";

/** Fails (not skips) when PRoot or the Debian rootfs is missing. */
export function requireProot(): void {
  if (!existsSync('/usr/bin/proot')) throw new Error(`proot is not installed: ${setupHint}`);
  if (!existsSync(join(ROOTFS, '.runlog-complete'))) throw new Error(`no Debian rootfs at ${ROOTFS}: ${setupHint}`);
}

/**
 * Docker answering (support/docker.ts's requireDocker), PRoot and its rootfs (requireProot) and the app-base image
 * reference recorded by `npm run setup`: fails when any is missing. Returns the Engine client and the image ref.
 */
export async function requireDockerAppBase(): Promise<{ docker: Docker; image: string }> {
  requireProot(); // the toolchain is checked against the same rootfs the image is built from
  await requireDocker();
  const refFile = join(SETUP_DIR, 'images/app-base.ref');
  if (!existsSync(refFile)) throw new Error(`no app-base image recorded at ${refFile}: ${setupHint}`);
  const image = readFileSync(refFile, 'utf8').trim();
  if (!/^localhost:\d+\/app-base@sha256:[0-9a-f]{64}$/.test(image))
    throw new Error(`${refFile} holds '${image}', not a digest reference: ${setupHint}`);
  return { docker, image };
}

export interface TestWorkspace {
  /** runlog home for the runners. */
  home: string;
  /** apps workspace (mounted at /workspace). */
  workspace: string;
  appsDir: string;
  /** Copies examples/hello-app (symlinks dereferenced) to apps/<appId> with manifest overrides; returns the parsed manifest. */
  installHello(overrides?: Record<string, unknown>, appId?: string): AppManifest;
  /** Writes an app from files (entrypoint.sh is made executable); returns the parsed manifest. */
  installApp(appId: string, manifest: Record<string, unknown>, files: Record<string, string>): AppManifest;
  cleanup(): void;
}

/** Everything under one temporary root, so one rmSync removes it. */
export function makeWorkspace(prefix = 'runlog-sbx-'): TestWorkspace {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const home = join(root, 'home');
  const workspace = join(root, 'workspace');
  const appsDir = join(workspace, 'apps');
  mkdirSync(home, { recursive: true });
  mkdirSync(appsDir, { recursive: true });
  const writeManifest = (dir: string, m: Record<string, unknown>): AppManifest => {
    writeFileSync(join(dir, 'runlog.json'), JSON.stringify(m, null, 2));
    return parseManifest(readFileSync(join(dir, 'runlog.json'), 'utf8'), dir, {
      entrypointExists: existsSync(join(dir, String(m.entrypoint ?? 'entrypoint.sh'))),
    });
  };
  return {
    home,
    workspace,
    appsDir,
    installHello(overrides = {}, appId = HELLO_APP_ID) {
      const dir = join(appsDir, appId);
      rmSync(dir, { recursive: true, force: true });
      cpSync(HELLO_APP_DIR, dir, { recursive: true, dereference: true });
      const base = JSON.parse(readFileSync(join(HELLO_APP_DIR, 'runlog.json'), 'utf8')) as Record<string, unknown>;
      return writeManifest(dir, { ...base, appId, ...overrides });
    },
    installApp(appId, manifest, files) {
      const dir = join(appsDir, appId);
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      for (const [name, content] of Object.entries(files)) {
        writeFileSync(join(dir, name), content);
        if (name.endsWith('.sh')) chmodSync(join(dir, name), 0o755);
      }
      return writeManifest(dir, { appId, ...manifest });
    },
    cleanup() {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** A server that answers health like an app, but for another identity (a port squatter / lying app). */
export const LIAR_SERVER = `
import { createServer } from 'node:http';
const claim = { appId: 'com.example.squatter', instanceId: 'squatter-1' };
createServer((req, res) => {
  res.setHeader('x-app-id', claim.appId);
  res.setHeader('x-app-instance-id', claim.instanceId);
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ status: 'ok', ...claim }));
}).listen(Number(process.env.APP_PORT), process.env.AURA_LAYER_TAG === '[ctnr]' ? '0.0.0.0' : '127.0.0.1');
`;

/** An app without the SDK: its health answer carries no identity at all. */
export const LEGACY_SERVER = `
import { createServer } from 'node:http';
createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ status: 'ok' }));
}).listen(Number(process.env.APP_PORT), process.env.AURA_LAYER_TAG === '[ctnr]' ? '0.0.0.0' : '127.0.0.1');
`;

export async function getJson<T = any>(
  host: string,
  port: number,
  path: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: T }> {
  const a = await httpRequest({ host, port, method: 'GET', path, timeoutMs: 10_000 });
  let body: unknown = a.body;
  try {
    body = JSON.parse(a.body);
  } catch {
    // text answer
  }
  return { status: a.status, headers: a.headers, body: body as T };
}

/** Whether a process exists (signal 0). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function until<T>(
  what: string,
  fn: () => T | Promise<T>,
  timeoutMs = 10_000,
  everyMs = 50,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Removes the containers (by this test home's label) and the network a test created. */
export async function cleanupDocker(docker: Docker, home: string, network?: string): Promise<void> {
  const mine = await docker.listContainers({ all: true, filters: { label: ['runlog.test=1', `runlog.home=${home}`] } });
  await Promise.all(
    mine.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => {}),
    ),
  );
  if (network) {
    const nets = await docker.listNetworks({ filters: { name: [network], label: ['runlog.test=1'] } });
    for (const n of nets.filter((x) => x.Name === network))
      await docker
        .getNetwork(n.Id)
        .remove()
        .catch(() => {});
  }
}
