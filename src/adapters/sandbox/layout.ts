// Where runlog keeps sandbox files under its home directory (RUNLOG_HOME, e.g. ~/.runlog):
//
//   <home>/toolchain/                       the toolchain registry → /aura/all-tools (both sandboxes)
//   <home>/instances/<instanceId>/tools/    the instance's allowlist → /aura/my-tools
//   <home>/instances/<instanceId>/data/     ProotRunner: per-instance data → /data
//   <home>/instances/<instanceId>/tmp/      ProotRunner: the instance's private /tmp (0700)
//   <home>/instances/<instanceId>/var-tmp/  ProotRunner: the instance's private /var/tmp (0700)
//   <home>/app-data/<appId>/                ContainerRunner: per-app data → /data (survives respawns)
//   <home>/user-home/                       ProotRunner: the per-user home shared by apps → /root
//   <home>/bashrc.runlog.sh                 → /root/.bashrc (prompt annotated with $AURA_LAYER_TAG)

import { mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isValidAppId } from '../../domain/manifest.ts';
import { ValidationError } from '../../domain/errors.ts';

/** Instance ids are used in paths, container names and labels. */
export const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function assertIds(instanceId: string, appId: string): void {
  const issues: string[] = [];
  if (!INSTANCE_ID.test(instanceId)) issues.push(`instanceId '${instanceId}' must match ${INSTANCE_ID.source}`);
  if (!isValidAppId(appId)) issues.push(`appId '${appId}' is not a reverse-DNS app id`);
  if (issues.length) throw new ValidationError('SPAWN_INVALID', issues.join('; '), issues);
}

export interface HomeLayout {
  home: string;
  toolchainDir: string;
  instanceToolsDir(instanceId: string): string;
  instanceDataDir(instanceId: string): string;
  instanceTmpDir(instanceId: string): string;
  instanceVarTmpDir(instanceId: string): string;
  appDataDir(appId: string): string;
  userHomeDir: string;
  bashrcFile: string;
}

export function homeLayout(home: string): HomeLayout {
  return {
    home,
    toolchainDir: join(home, 'toolchain'),
    instanceToolsDir: (id) => join(home, 'instances', id, 'tools'),
    instanceDataDir: (id) => join(home, 'instances', id, 'data'),
    instanceTmpDir: (id) => join(home, 'instances', id, 'tmp'),
    instanceVarTmpDir: (id) => join(home, 'instances', id, 'var-tmp'),
    appDataDir: (appId) => join(home, 'app-data', appId),
    userHomeDir: join(home, 'user-home'),
    bashrcFile: join(home, 'bashrc.runlog.sh'),
  };
}

const BASHRC = `# runlog: sourced by interactive shells inside app sandboxes.
# $AURA_LAYER_TAG says which layer this shell runs in: [proot] or [ctnr].
PS1='\${AURA_LAYER_TAG:+$AURA_LAYER_TAG }\\u@\\h:\\w\\$ '
`;

/** Writes the bashrc snippet when its content differs (so a bind mount of it stays valid). */
export function ensureBashrc(layout: HomeLayout): string {
  mkdirSync(layout.home, { recursive: true });
  let current: string | null = null;
  try {
    current = readFileSync(layout.bashrcFile, 'utf8');
  } catch {
    // first run
  }
  if (current !== BASHRC) writeFileSync(layout.bashrcFile, BASHRC, { mode: 0o644 });
  return layout.bashrcFile;
}
