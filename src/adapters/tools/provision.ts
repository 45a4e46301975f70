// The allowlist: an instance's own directory, mounted at /aura/my-tools (first on its PATH), holding a
// symlink `<name> → /aura/all-tools/<name>` for exactly the tools its manifest grants.
//
// Re-provisioning is idempotent and also REMOVES links for revoked tools. The running child sees the change
// at its next PATH lookup, without a respawn, because the directory it has mounted is this same directory
// (a bind mount of the directory, not of its entries). Links are replaced atomically (temp link + rename).

import { lstatSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { expandTools } from '../../domain/manifest.ts';
import { ALL_TOOLS_MOUNT, toolchainNames } from './toolchain.ts';

export interface ProvisionResult {
  /** Tools now linked (after `*` and alias expansion). */
  linked: string[];
  /** Granted but absent from the toolchain on this host. */
  missing: string[];
  /** Links removed because the tool is no longer granted. */
  removed: string[];
}

/**
 * Makes `instanceToolsDir` hold links for exactly `tools` (manifest.tools: names, `*`, `claude-code`).
 * `allToolsDir` is the host directory of the toolchain (mounted at `allToolsMount` in the sandbox).
 */
export function provisionToolsDir(
  instanceToolsDir: string,
  allToolsDir: string,
  tools: readonly string[],
  allToolsMount: string = ALL_TOOLS_MOUNT,
): ProvisionResult {
  mkdirSync(instanceToolsDir, { recursive: true });
  const available = toolchainNames(allToolsDir);
  const wanted = expandTools(tools, available);
  const linked: string[] = [];
  const missing: string[] = [];
  for (const name of wanted) {
    if (!available.includes(name)) {
      missing.push(name);
      continue;
    }
    const at = join(instanceToolsDir, name);
    const target = `${allToolsMount}/${name}`;
    let current: string | null = null;
    try {
      current = readlinkSync(at);
    } catch {
      // absent or not a link
    }
    if (current !== target) {
      const tmp = join(instanceToolsDir, `.${name}.tmp-${process.pid}`);
      rmSync(tmp, { force: true });
      symlinkSync(target, tmp);
      renameSync(tmp, at);
    }
    linked.push(name);
  }
  const removed: string[] = [];
  for (const entry of readdirSync(instanceToolsDir)) {
    if (linked.includes(entry)) continue;
    const p = join(instanceToolsDir, entry);
    const isDir = lstatSync(p).isDirectory();
    rmSync(p, { recursive: isDir, force: true });
    if (!entry.startsWith('.')) removed.push(entry);
  }
  return { linked, missing, removed };
}
