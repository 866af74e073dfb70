// The coordinator's assignment decision (docs/applications.md "Lifecycle" and
// docs/api.md "State": unsatisfiable placements are reported in `unplaced`, never rejected). Pure:
// the reconcile loop hands in the registry's applications, the eligible nodes (live, not
// draining) and the previous placements, and records what comes back.
//
// Rules, in order:
// - blocked and retired applications are placed nowhere (an explicit empty placement, so the
//   caller overwrites whatever was recorded before and every node stops them);
// - `replicas: 'all'` is every eligible node matching the selector;
// - `replicas: N` is N matching nodes: previous nodes that still match are kept (a process that
//   runs stays where it is), the rest filled by fewest placed processes, then node id;
// - a selector narrows to nodes whose labels hold every selector pair;
// - fewer matching nodes than wanted (or none) still places on what matches, and the application
//   is reported in `unplaced` with the reason.
// Applications are weighed in name order, so the same input always gives the same answer.

import type { ApplicationRecord, Replicas } from '../../registry/records.ts';

/** A node that may be placed on: live and not draining. */
export interface EligibleNode {
  id: string;
  labels: Record<string, string>;
}

export interface PlacementInput {
  applications: readonly ApplicationRecord[];
  nodes: readonly EligibleNode[];
  /** Application name → node ids of the placement recorded before this pass. */
  previous: ReadonlyMap<string, readonly string[]>;
}

/** An application the pass could not place as asked (an entry of CoordinatorView `unplaced`). */
export interface Unplaced {
  application: string;
  /** Why, in words an operator acts on. */
  reason: string;
  replicas: Replicas;
  selector: Record<string, string> | null;
  /** How many nodes it was placed on all the same. */
  placed: number;
}

export interface PlacementResult {
  /** Application name → node ids (sorted), for every application given; empty places nowhere. */
  placements: Map<string, string[]>;
  /** Sorted by application name. */
  unplaced: Unplaced[];
}

export function placeApplications(input: PlacementInput): PlacementResult {
  const nodes = [...input.nodes].sort((a, b) => compareIds(a.id, b.id));
  const applications = [...input.applications].sort((a, b) => compareIds(a.name, b.name));
  const load = new Map<string, number>(nodes.map((node) => [node.id, 0]));
  const chosen = new Map<string, string[]>();
  const placeable = applications.filter((app) => !app.blocked && !app.retired);

  // Pass 1: what stays. Counting every kept process before filling keeps the fill independent of
  // the order applications are weighed in.
  for (const app of placeable) {
    const matching = matchingNodes(nodes, app.selector);
    let kept: string[];
    if (app.replicas === 'all') kept = matching.map((node) => node.id);
    else {
      const before = new Set(input.previous.get(app.name) ?? []);
      kept = pickLeastLoaded(
        matching.filter((node) => before.has(node.id)).map((node) => node.id),
        load,
        wantedCount(app.replicas),
      );
    }
    for (const id of kept) load.set(id, load.get(id)! + 1);
    chosen.set(app.name, kept);
  }

  // Pass 2: fill the counted applications up to their replicas.
  for (const app of placeable) {
    if (app.replicas === 'all') continue;
    const taken = chosen.get(app.name)!;
    const missing = wantedCount(app.replicas) - taken.length;
    if (missing <= 0) continue;
    const free = matchingNodes(nodes, app.selector)
      .map((node) => node.id)
      .filter((id) => !taken.includes(id));
    for (const id of pickLeastLoaded(free, load, missing)) {
      load.set(id, load.get(id)! + 1);
      taken.push(id);
    }
  }

  const placements = new Map<string, string[]>();
  const unplaced: Unplaced[] = [];
  for (const app of applications) {
    const placed = (chosen.get(app.name) ?? []).sort(compareIds);
    placements.set(app.name, placed);
    if (app.blocked || app.retired) continue;
    const reason = shortfall(app, placed.length, nodes.length);
    if (reason) {
      unplaced.push({
        application: app.name,
        reason,
        replicas: app.replicas,
        selector: app.selector,
        placed: placed.length,
      });
    }
  }
  return { placements, unplaced };
}

/** True when the node's labels hold every pair of the selector; null or `{}` matches every node. */
export function matchesSelector(
  labels: Record<string, string>,
  selector: Record<string, string> | null,
): boolean {
  if (!selector) return true;
  return Object.entries(selector).every(
    ([key, value]) => Object.hasOwn(labels, key) && labels[key] === value,
  );
}

function matchingNodes(
  nodes: readonly EligibleNode[],
  selector: Record<string, string> | null,
): EligibleNode[] {
  return nodes.filter((node) => matchesSelector(node.labels, selector));
}

/** A count the records should never hold (0, negative, fractional) places nowhere. */
function wantedCount(replicas: number): number {
  return Number.isInteger(replicas) && replicas >= 1 ? replicas : 0;
}

/** Up to `count` ids, fewest placed processes first, then by id. */
function pickLeastLoaded(ids: string[], load: ReadonlyMap<string, number>, count: number): string[] {
  return [...ids]
    .sort((a, b) => load.get(a)! - load.get(b)! || compareIds(a, b))
    .slice(0, Math.max(0, count));
}

/** Why an application got fewer nodes than it asked for; null when it got them all. */
function shortfall(app: ApplicationRecord, placed: number, eligible: number): string | null {
  const where = app.selector && Object.keys(app.selector).length > 0 ? 'match its selector' : 'are eligible';
  const selector = app.selector ? ` (selector ${JSON.stringify(app.selector)})` : '';
  if (app.replicas === 'all') {
    if (placed > 0) return null;
    if (eligible === 0) return 'no node is eligible (live and not draining)';
    return `no eligible node matches its selector${selector}`;
  }
  const wanted = wantedCount(app.replicas);
  if (wanted === 0) return `replicas ${JSON.stringify(app.replicas)} is not a whole number >= 1`;
  if (placed >= wanted) return null;
  if (eligible === 0) return 'no node is eligible (live and not draining)';
  if (placed === 0) return `no eligible node matches its selector${selector}`;
  return `replicas ${wanted} but only ${placed} eligible node${placed === 1 ? '' : 's'} ${where}${selector}`;
}

/** Code-unit order, the same in every locale. */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
