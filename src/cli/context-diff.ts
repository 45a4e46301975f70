// Context diffs: what changed in an actor's context from one step to the next, as `runlog replay --step` prints it.
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import type { Step } from '../machines/runtime.ts';
import { truncate } from './output.ts';

export interface ContextChange {
  /** Dotted path of the key ("spec.tools", "lastCrash"). */
  path: string;
  op: 'added' | 'removed' | 'changed';
  before?: unknown;
  after?: unknown;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const same = (a: unknown, b: unknown): boolean => a === b || JSON.stringify(a) === JSON.stringify(b);

/**
 * Key-level differences between two contexts, recursing into nested objects. An array that only grew
 * (or shrank) at its end reports the items added (removed) as `path[i]`; other array edits compare whole.
 */
export function diffContext(before: unknown, after: unknown, prefix = ''): ContextChange[] {
  if (Array.isArray(before) && Array.isArray(after) && prefix) {
    const n = Math.min(before.length, after.length);
    if (before.slice(0, n).every((x, i) => same(x, after[i]))) {
      const out: ContextChange[] = [];
      for (let i = n; i < after.length; i++) out.push({ path: `${prefix}[${i}]`, op: 'added', after: after[i] });
      for (let i = n; i < before.length; i++) out.push({ path: `${prefix}[${i}]`, op: 'removed', before: before[i] });
      return out;
    }
  }
  if (!isPlainObject(before) || !isPlainObject(after)) {
    return same(before, after) ? [] : [{ path: prefix || '(context)', op: 'changed', before, after }];
  }
  const out: ContextChange[] = [];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const k of keys) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (!Object.hasOwn(before, k)) out.push({ path, op: 'added', after: after[k] });
    else if (!Object.hasOwn(after, k)) out.push({ path, op: 'removed', before: before[k] });
    else out.push(...diffContext(before[k], after[k], path));
  }
  return out;
}

const show = (v: unknown): string => (v === undefined ? 'undefined' : truncate(JSON.stringify(v), 140));

/** One change as text; an object that appeared (null → {…}) is listed key by key underneath. */
export function formatChange(c: ContextChange): string {
  if (c.op === 'added') return `+ ${c.path} = ${show(c.after)}`;
  if (c.op === 'removed') return `- ${c.path} (was ${show(c.before)})`;
  if ((c.before === null || c.before === undefined) && isPlainObject(c.after) && Object.keys(c.after).length > 0) {
    const keys = Object.entries(c.after).map(([k, v]) => `\n    ${k}: ${show(v)}`);
    return `~ ${c.path}: ${show(c.before)} → {${keys.join('')}\n  }`;
  }
  return `~ ${c.path}: ${show(c.before)} → ${show(c.after)}`;
}

/** Each step with what changed in the context since the step before. */
export function stepsWithChanges(
  steps: readonly Step[],
  initial: Record<string, unknown> = {},
): (Step & { changes: ContextChange[] })[] {
  let prev: Record<string, unknown> = initial;
  return steps.map((s) => {
    const changes = diffContext(prev, s.context);
    prev = s.context;
    return { ...s, changes };
  });
}
