// The apps in a workspace: every directory `<appsDir>/<appId>/` holding a runlog.json, kept current with
// fs.watch. A watcher on appsDir sees apps appear and disappear; one watcher per app directory sees its
// runlog.json (and entrypoint.sh) change — editors that save by rename are covered because the directory,
// not the file, is watched. Events per directory are debounced, the manifest is re-read and re-validated,
// and listeners get `added` / `changed` (only when the parsed manifest differs) / `removed` / `invalid`.
//
// This is the seed's cap-grant fast path: a tools[] edit in runlog.json → `changed` → the actor host calls
// provisionToolsDir() for the app's running instances, which see the new tool without a respawn.

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

export interface AppRegistryOptions {
  appsDir: string;
  knownTools?: readonly string[];
  debounceMs?: number;
}

export class AppRegistry {
  private readonly apps = new Map<string, AppEntry>();
  private readonly invalid = new Map<string, ValidationError>();
  private readonly dirWatchers = new Map<string, FSWatcher>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly listeners = new Set<(e: AppRegistryEvent) => void>();
  private rootWatcher: FSWatcher | null = null;

  constructor(private readonly opts: AppRegistryOptions) {}

  /** Scans appsDir (emitting `added`/`invalid` for what is there) and starts watching. */
  async start(): Promise<void> {
    if (!existsSync(this.opts.appsDir)) throw new ValidationError('APPS_DIR_MISSING', `apps directory ${this.opts.appsDir} does not exist`);
    this.rootWatcher = watch(this.opts.appsDir, (_event, name) => {
      if (name) this.schedule(name.toString());
      else this.rescan();
    });
    this.rootWatcher.on('error', () => this.rescan());
    this.rescan();
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
    if (!this.dirWatchers.has(name)) {
      try {
        const w = watch(dir, () => this.schedule(name));
        w.on('error', () => this.schedule(name));
        this.dirWatchers.set(name, w);
      } catch {
        // removed between stat and watch: the root watcher reports it
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
    else if (JSON.stringify(previous) !== JSON.stringify(manifest)) this.emit({ type: 'changed', appId: name, dir, manifest, previous });
  }
}
