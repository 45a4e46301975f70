// `cap grant` has one meaning: it changes an APP's tool allowlist, as the seed's model has it
// (`aura cap grant com.example.foo claude`: the app's manifest is the allowlist, and every instance of the app
// follows it). In runlog the grant is a fact in the log — `app.tool-granted` / `app.tool-revoked` on the stream
// `app-<appId>` — layered over the tools[] of the app's manifest, and never a rewrite of the manifest (which is
// the user's source, replaced on the next install). So:
//   - every running instance of the app gets `instance.tool-granted`/`-revoked` and its /aura/my-tools is
//     re-provisioned without a respawn;
//   - every later spawn of the app starts from manifest.tools with the app's grants applied;
//   - a manifest edit (the registry watcher) keeps the grants: they apply over the new tools[].
// The app stream has no machine: folds and projections skip streams of no actor kind (inspection.ts foldLog).
import { RunlogError, ValidationError } from '../domain/errors.ts';
import type { RecordedEvent } from '../domain/events.ts';
import { isValidAppId, TOOL_ALIASES, TOOL_CATALOG, TOOL_WILDCARD } from '../domain/manifest.ts';
import type { EventStore } from '../store/event-store.ts';
import type { HostStore } from '../store/host-store.ts';

export const appStream = (appId: string): string => `app-${appId}`;

export const APP_TOOL_GRANTED = 'app.tool-granted';
export const APP_TOOL_REVOKED = 'app.tool-revoked';

/** tool → true (granted) / false (revoked): the last word of `cap` on each tool of the app. */
export type ToolOverrides = Map<string, boolean>;

export function readToolOverrides(store: Pick<EventStore, 'read'>, appId: string): ToolOverrides {
  const out: ToolOverrides = new Map();
  for (const e of store.read(appStream(appId))) {
    const tool = String(e.data.tool);
    if (e.type === APP_TOOL_GRANTED) out.set(tool, true);
    else if (e.type === APP_TOOL_REVOKED) out.set(tool, false);
  }
  return out;
}

/** The app's allowlist: its manifest's tools with the grants added and the revocations removed, in order. */
export function effectiveTools(manifestTools: readonly string[], overrides: ToolOverrides): string[] {
  const tools = manifestTools.filter((t) => overrides.get(t) !== false);
  for (const [t, granted] of overrides) if (granted && !tools.includes(t)) tools.push(t);
  return tools;
}

export function assertToolName(tool: string): void {
  const known = [...TOOL_CATALOG, TOOL_WILDCARD, ...Object.keys(TOOL_ALIASES)];
  if (!known.includes(tool)) throw new ValidationError('TOOL_UNKNOWN', `unknown tool '${tool}': known tools are ${known.join(', ')}`, [`tool: '${tool}' is not one of ${known.join(', ')}`]);
}

export function assertAppId(appId: string): void {
  if (!isValidAppId(appId)) throw new ValidationError('APP_ID_INVALID', `'${appId}' is not an app id (reverse-DNS, like com.example.hello)`, [`appId: '${appId}' is not reverse-DNS`]);
}

/** Records one grant or revocation of a tool for an app (one writer per log: the version read is current). */
export async function recordToolChange(store: Pick<HostStore, 'append' | 'streamVersion'>, appId: string, tool: string, grant: boolean): Promise<RecordedEvent> {
  const stream = appStream(appId);
  const version = store.streamVersion(stream);
  const r = await store.append(stream, [{ type: grant ? APP_TOOL_GRANTED : APP_TOOL_REVOKED, data: { appId, tool, via: 'cap' } }], { expectedVersion: version === 0 ? 'no-stream' : version });
  const e = r.events[0];
  if (!e) throw new RunlogError('APPEND_FAILED', `recording ${tool} for ${appId} appended nothing`);
  return e;
}
