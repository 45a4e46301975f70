// The apps in a workspace: every directory `<appsDir>/<appId>/` holding a runlog.json, kept current with
// fs.watch. A watcher on appsDir sees apps appear and disappear; one watcher per app directory sees its
// runlog.json (and entrypoint.sh) change — editors that save by rename are covered because the directory,
// not the file, is watched. Events per directory are debounced, the manifest is re-read and re-validated,
// and listeners get `added` / `changed` (only when the parsed manifest differs) / `removed` / `invalid`.
//
// This is the seed's cap-grant fast path: a tools[] edit in runlog.json → `changed` → the actor host calls
// provisionToolsDir() for the app's running instances, which see the new tool without a respawn.
//
// When the kernel refuses a watch (the user's inotify instances or watches used up: EMFILE, ENOSPC, or any other
// error), the registry polls instead: every `pollMs` it rescans the workspace, which reports the same events a
// little later. It says so once (`onPolling`) and `mode` tells; nothing is missed, only noticed later.

import { existsSync, readdirSync, statSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { ValidationError } from '../../domain/errors.ts';
import type { AppManifest } from '../../domain/manifest.ts';
import { loadManifest } from './load-manifest.ts';

export interface AppEntry {
  appId: string;
  dir: string;
  manifest: AppManifest;
}

export type AppRegistryEvent =
  | { type: 'added' | 'changed'; appId: string; dir: string; manifest: AppManifest; previous?: AppManifest }
  | { type: 'removed'; appId: string; dir: string }
  | { type: 'invalid'; appId: string; dir: string; error: ValidationError };

/** How the registry watches a directory (fs.watch; a test injects one that fails as the kernel can). */
export type WatchFactory = (dir: string, listener: (event: string, name: string | Buffer | null) => void) => FSWatcher;

export interface AppRegistryOptions {
  appsDir: string;
  knownTools?: readonly string[];
  debounceMs?: number;
  /** Default fs.watch. */
  watch?: WatchFactory;
  /** How often the workspace is rescanned when it cannot be watched (default 2000 ms). */
  pollMs?: number;
  /** Told once, when watching failed and the registry polls instead. */
  onPolling?: (reason: string) => void;
}

const DEFAULT_POLL_MS = 2000;

export class AppRegistry {
  private readonly apps = new Map<string, AppEntry>();
  private readonly invalid = new Map<string, ValidationError>();
  private readonly dirWatchers = new Map<string, FSWatcher>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly listeners = new Set<(e: AppRegistryEvent) => void>();
  private rootWatcher: FSWatcher | null = null;
  private poller: NodeJS.Timeout | null = null;

  constructor(private readonly opts: AppRegistryOptions) {}

  /** 'watching' (fs.watch) or 'polling' (a watch was refused: rescans every pollMs). */
  get mode(): 'watching' | 'polling' {
    return this.poller ? 'polling' : 'watching';
  }

  /** Scans appsDir (emitting `added`/`invalid` for what is there) and starts watching (or polling, see above). */
  async start(): Promise<void> {
    if (!existsSync(this.opts.appsDir))
      throw new ValidationError('APPS_DIR_MISSING', `apps directory ${this.opts.appsDir} does not exist`);
    try {
      this.rootWatcher = this.watchDir(this.opts.appsDir, (_event, name) => {
        if (name) this.schedule(name.toString());
        else this.rescan();
      });
      this.rootWatcher.on('error', () => this.rescan());
    } catch (err) {
      this.poll(this.opts.appsDir, err);
    }
    this.rescan();
  }

  private watchDir(dir: string, listener: (event: string, name: string | Buffer | null) => void): FSWatcher {
    return (this.opts.watch ?? watch)(dir, listener);
  }

  /** Watching `dir` failed: the whole workspace is rescanned every pollMs from now on (said once). */
  private poll(dir: string, err: unknown): void {
    if (this.poller) return;
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'EMFILE' || code === 'ENOSPC'
        ? `${code}: the user's inotify instances or watches are used up (fs.inotify.max_user_instances, max_user_watches)`
        : String((err as Error).message ?? err);
    const pollMs = this.opts.pollMs ?? DEFAULT_POLL_MS;
    this.poller = setInterval(() => this.rescan(), pollMs);
    this.poller.unref();
    this.opts.onPolling?.(
      `cannot watch ${dir} (${why}); rescanning the apps every ${pollMs} ms instead: manifest changes are noticed up to ${pollMs} ms later`,
    );
  }

  list(): AppEntry[] {
    return [...this.apps.values()].sort((a, b) => a.appId.localeCompare(b.appId));
  }

  get(appId: string): AppEntry | undefined {
    return this.apps.get(appId);
  }

  /** Directories whose manifest is currently invalid, with every issue. */
  problems(): { appId: string; error: ValidationError }[] {
    return [...this.invalid].map(([appId, error]) => ({ appId, error }));
  }

  on(listener: (e: AppRegistryEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Re-reads every app directory now (also what a watcher error falls back to). */
  rescan(): void {
    const names = new Set<string>();
    try {
      for (const n of readdirSync(this.opts.appsDir)) if (!n.startsWith('.')) names.add(n);
    } catch {
      // appsDir vanished: every app is removed below
    }
    for (const n of [...this.apps.keys(), ...this.invalid.keys()]) names.add(n);
    for (const n of names) this.reload(n);
  }

  close(): void {
    if (this.poller) clearInterval(this.poller);
    this.poller = null;
    this.rootWatcher?.close();
    this.rootWatcher = null;
    for (const w of this.dirWatchers.values()) w.close();
    this.dirWatchers.clear();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.listeners.clear();
  }

  private schedule(name: string): void {
    if (name.startsWith('.')) return;
    clearTimeout(this.timers.get(name));
    this.timers.set(
      name,
      setTimeout(() => {
        this.timers.delete(name);
        this.reload(name);
      }, this.opts.debounceMs ?? 50),
    );
  }

  private emit(e: AppRegistryEvent): void {
    for (const l of this.listeners) l(e);
  }

  private reload(name: string): void {
    const dir = join(this.opts.appsDir, name);
    let isDir = false;
    try {
      isDir = statSync(dir).isDirectory();
    } catch {
      // gone
    }
    if (!isDir) {
      this.dirWatchers.get(name)?.close();
      this.dirWatchers.delete(name);
      this.invalid.delete(name);
      const had = this.apps.get(name);
      if (had) {
        this.apps.delete(name);
        this.emit({ type: 'removed', appId: name, dir });
      }
      return;
    }
    if (!this.dirWatchers.has(name) && !this.poller) {
      try {
        const w = this.watchDir(dir, () => this.schedule(name));
        w.on('error', () => this.schedule(name));
        this.dirWatchers.set(name, w);
      } catch (err) {
        // Removed between stat and watch: the root watcher reports it. Refused by the kernel: poll instead.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.poll(dir, err);
      }
    }
    let manifest: AppManifest;
    try {
      manifest = loadManifest(dir, { knownTools: this.opts.knownTools });
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      const had = this.apps.get(name);
      this.apps.delete(name);
      const before = this.invalid.get(name);
      this.invalid.set(name, e);
      if (!before || before.message !== e.message || had) this.emit({ type: 'invalid', appId: name, dir, error: e });
      return;
    }
    this.invalid.delete(name);
    const previous = this.apps.get(name)?.manifest;
    this.apps.set(name, { appId: name, dir, manifest });
    if (!previous) this.emit({ type: 'added', appId: name, dir, manifest });
    else if (JSON.stringify(previous) !== JSON.stringify(manifest))
      this.emit({ type: 'changed', appId: name, dir, manifest, previous });
  }
}
