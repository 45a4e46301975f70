// `cap grant` has one meaning: it changes an APP's tool allowlist, as the seed's model has it
// (`aura cap grant com.example.foo claude`: the app's manifest is the allowlist, and every instance of the app
// follows it). In runlog the grant is a fact in the log — `app.tool-granted` / `app.tool-revoked` on the stream
// `app-<appId>` — layered over the tools[] of the app's manifest, and never a rewrite of the manifest (which is
// the user's source, replaced on the next install). So:
//   - every running instance of the app gets `instance.tool-granted`/`-revoked` and its /aura/my-tools is
//     re-provisioned without a respawn — on a cluster, appended by the node that owns it (app-tool-sync.ts);
//   - every later spawn of the app starts from manifest.tools with the app's grants applied;
//   - a manifest edit (the registry watcher) keeps the grants: they apply over the new tools[].
// The app stream has no machine: folds and projections skip streams of no actor kind (inspection.ts foldLog).
import { RunlogError, ValidationError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import { isValidAppId, TOOL_ALIASES, TOOL_CATALOG, TOOL_WILDCARD } from '../../domain/manifest.ts';
import type { EventStorePort } from '../../store/port.ts';

export const appStream = (appId: string): string => `app-${appId}`;

export const APP_TOOL_GRANTED = 'app.tool-granted';
export const APP_TOOL_REVOKED = 'app.tool-revoked';

/** tool → true (granted) / false (revoked): the last word of `cap` on each tool of the app. */
export type ToolOverrides = Map<string, boolean>;

export async function readToolOverrides(
  store: Pick<EventStorePort, 'readStream'>,
  appId: string,
): Promise<ToolOverrides> {
  const out: ToolOverrides = new Map();
  for await (const e of store.readStream(appStream(appId))) {
    const tool = String(e.data.tool);
    if (e.type === APP_TOOL_GRANTED) out.set(tool, true);
    else if (e.type === APP_TOOL_REVOKED) out.set(tool, false);
  }
  return out;
}

/** The last `cap` word on each tool of the app, with the app stream's event that said it (its global position). */
export type ToolLog = Map<string, { granted: boolean; seq: number }>;

export async function readToolLog(store: Pick<EventStorePort, 'readStream'>, appId: string): Promise<ToolLog> {
  const out: ToolLog = new Map();
  for await (const e of store.readStream(appStream(appId))) {
    if (e.type === APP_TOOL_GRANTED || e.type === APP_TOOL_REVOKED)
      out.set(String(e.data.tool), { granted: e.type === APP_TOOL_GRANTED, seq: e.seq });
  }
  return out;
}

/** One grant or revocation an instance lacks, with the app event it carries out. */
export interface ToolChange {
  tool: string;
  granted: boolean;
  /** The `app.tool-granted`/`-revoked` event this change carries out (recorded in the instance event's meta.cap). */
  seq: number;
}

/**
 * What brings an instance whose tools are `current` to the app's recorded `cap` words: only the tools that differ
 * (none when it is there already, so applying twice changes nothing). Tools no `cap` mentions are the manifest's
 * business (the registry watcher), not touched here.
 */
export function toolChanges(current: readonly string[], log: ToolLog): ToolChange[] {
  const out: ToolChange[] = [];
  for (const [tool, { granted, seq }] of log) if (current.includes(tool) !== granted) out.push({ tool, granted, seq });
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
  if (!known.includes(tool))
    throw new ValidationError('TOOL_UNKNOWN', `unknown tool '${tool}': known tools are ${known.join(', ')}`, [
      `tool: '${tool}' is not one of ${known.join(', ')}`,
    ]);
}

export function assertAppId(appId: string): void {
  if (!isValidAppId(appId))
    throw new ValidationError('APP_ID_INVALID', `'${appId}' is not an app id (reverse-DNS, like com.example.hello)`, [
      `appId: '${appId}' is not reverse-DNS`,
    ]);
}

/**
 * Records one grant or revocation of a tool for an app. Any version: on a cluster several nodes may record for the
 * same app at once, and the log's order (the same for every node) says which word is the last.
 */
export async function recordToolChange(
  store: Pick<EventStorePort, 'appendToStream'>,
  appId: string,
  tool: string,
  grant: boolean,
): Promise<RecordedEvent> {
  const stream = appStream(appId);
  const r = await store.appendToStream(
    stream,
    [{ type: grant ? APP_TOOL_GRANTED : APP_TOOL_REVOKED, data: { appId, tool, via: 'cap' } }],
    { expectedVersion: 'any' },
  );
  const e = r.events[0];
  if (!e) throw new RunlogError('APPEND_FAILED', `recording ${tool} for ${appId} appended nothing`);
  return e;
}

/** A running instance of the app as the log has it, for telling what a `cap` change has reached. */
export interface InstanceOfApp {
  instanceId: string;
  /** Its tools now (folded from its events); null when it has no spec yet. */
  tools: readonly string[] | null;
  events: readonly RecordedEvent[];
  /** The node holding its lease now (null: none, or one machine). */
  owner: string | null;
}

export interface CapReach {
  /** The instances a node brought to the change: each with the node that appended the event (its owner then). */
  changed: { instanceId: string; node: string }[];
  /** Running instances that still differ: the change is recorded, and their owner applies it. */
  pending: { instanceId: string; node: string | null }[];
}

/**
 * What the change recorded at `seq` has reached, read from the log alone: an instance event carrying it out has
 * meta.cap = seq (app-tool-sync.ts), appended by its owner (meta.node; `here` on a log without nodes).
 */
export function capReach(
  instances: readonly InstanceOfApp[],
  tool: string,
  granted: boolean,
  seq: number,
  here: string,
): CapReach {
  const out: CapReach = { changed: [], pending: [] };
  for (const i of instances) {
    const hit = i.events.find((e) => (e.meta as { cap?: unknown } | undefined)?.cap === seq);
    if (hit)
      out.changed.push({ instanceId: i.instanceId, node: String((hit.meta as { node?: unknown }).node ?? here) });
    else if (i.tools && i.tools.includes(tool) !== granted)
      out.pending.push({ instanceId: i.instanceId, node: i.owner });
  }
  return out;
}
