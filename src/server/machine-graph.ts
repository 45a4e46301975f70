// A machine's definition as plain data for drawing (the inspector's statechart) and for checking
// histories (which event types a kind knows): states with their nesting, entry effects and transitions.
// Derived from XState's own `machine.root` state nodes, so it never drifts from the machine.
import type { AnyStateMachine } from 'xstate';

export interface ChartTransition {
  /** The event type, or "" for an eventless (`always`) transition. */
  event: string;
  /** Target state paths ("crashed.backoff"); empty = the transition stays where it is (actions only). */
  targets: string[];
  /** Named actions (effects and named context updates) the transition runs. */
  actions: string[];
  guard: string | null;
}

export interface ChartState {
  /** Dotted path from the root, as `stateName` prints it ("" for the root). */
  path: string;
  key: string;
  type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  /** Key of the initial child (compound states). */
  initial: string | null;
  entry: string[];
  exit: string[];
  transitions: ChartTransition[];
  states: ChartState[];
}

export interface MachineChart {
  kind: string;
  id: string;
  root: ChartState;
  /** Every event type some state of the machine takes. */
  events: string[];
}

interface NodeLike {
  key: string;
  path: string[];
  type: ChartState['type'];
  states: Record<string, NodeLike>;
  entry: unknown[];
  exit: unknown[];
  initial?: { target?: NodeLike[] };
  transitions: Map<string, TransitionLike[]>;
  always?: TransitionLike[];
}

interface TransitionLike {
  eventType: string;
  target?: readonly NodeLike[];
  actions: readonly unknown[];
  guard?: unknown;
}

/** A readable action name; XState's bookkeeping (assign without a name, raise…) is left out. */
function actionName(a: unknown): string | null {
  let name: unknown = null;
  if (typeof a === 'string') name = a;
  else if (a && (typeof a === 'object' || typeof a === 'function') && 'type' in a) name = (a as { type: unknown }).type;
  if (typeof name !== 'string' || name.startsWith('xstate.')) return null;
  return name;
}

function guardName(g: unknown): string | null {
  if (g === undefined || g === null) return null;
  if (typeof g === 'string') return g;
  if (typeof g === 'object' && 'type' in g) return String((g as { type: unknown }).type);
  return 'guard';
}

const names = (actions: readonly unknown[]): string[] => actions.map(actionName).filter((n): n is string => n !== null);

function transitionOf(t: TransitionLike): ChartTransition {
  return {
    event: t.eventType,
    targets: (t.target ?? []).map((n) => n.path.join('.')),
    actions: names(t.actions),
    guard: guardName(t.guard),
  };
}

function stateOf(node: NodeLike): ChartState {
  const transitions: ChartTransition[] = [];
  for (const list of node.transitions.values()) for (const t of list) transitions.push(transitionOf(t));
  for (const t of node.always ?? []) transitions.push({ ...transitionOf(t), event: '' });
  const initial = node.type === 'compound' ? (node.initial?.target?.[0]?.key ?? null) : null;
  return {
    path: node.path.join('.'),
    key: node.key,
    type: node.type,
    initial,
    entry: names(node.entry),
    exit: names(node.exit),
    transitions,
    states: Object.values(node.states).map(stateOf),
  };
}

export function describeMachine(kind: string, machine: AnyStateMachine): MachineChart {
  const root = stateOf(machine.root as unknown as NodeLike); // why: XState's StateNode is read through the few fields this chart needs
  const events = new Set<string>();
  const walk = (s: ChartState): void => {
    for (const t of s.transitions) if (t.event) events.add(t.event);
    s.states.forEach(walk);
  };
  walk(root);
  return { kind, id: machine.id, root, events: [...events].sort() };
}
