// Who is calling and what it reaches (docs/api.md "Callers and tiers": tiers and application
// scopes; "Operator keys"; "State" and "Applications" for narrowed reads).
// Scope patterns: `*` alone, exact application names, or prefix globs such as `shop-*`.

import { Problem } from '../problem.ts';

export type Role = 'admin' | 'operator';

export type Caller =
  | { kind: 'node'; id: string }
  | { kind: 'operator'; id: string; role: Role; applications: string[] }
  | { kind: 'workload'; issuer: string; subject: string; application: string }
  | { kind: 'ingress' };

export type OperatorCaller = Extract<Caller, { kind: 'operator' }>;

/** Whether one scope pattern reaches one application name. */
export function patternReaches(pattern: string, application: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('*')) return application.startsWith(pattern.slice(0, -1));
  return pattern === application;
}

/** Whether a list of scope patterns reaches one application name. */
export function patternsReach(patterns: readonly string[], application: string): boolean {
  return patterns.some((pattern) => patternReaches(pattern, application));
}

/** Node tokens reach every application; operators by their patterns; a workload its own application. */
export function scopeReaches(caller: Caller, application: string): boolean {
  switch (caller.kind) {
    case 'node':
      return true;
    case 'operator':
      return patternsReach(caller.applications, application);
    case 'workload':
      return caller.application === application;
    case 'ingress':
      return false;
  }
}

/**
 * Refuses a call naming an application the caller does not reach. The detail names the
 * application the caller asked for, never the applications its key reaches.
 */
export function requireScope(caller: Caller, application: string): void {
  if (scopeReaches(caller, application)) return;
  throw outOfScope(application);
}

export function outOfScope(application: string): Problem {
  return new Problem(
    'auth-scope',
    'Out of scope',
    `this key does not reach the application ${JSON.stringify(application)}`,
  );
}

/** Whether every application a requested pattern could reach is reached by `scope`. */
export function patternCovered(scope: readonly string[], requested: string): boolean {
  if (requested === '*') return scope.includes('*');
  if (!requested.endsWith('*')) return patternsReach(scope, requested);
  const prefix = requested.slice(0, -1);
  // A glob is covered only by `*` or a glob whose prefix its own prefix extends; no list of
  // exact names can cover the unbounded set a glob reaches.
  return scope.some((mine) => mine === '*' || (mine.endsWith('*') && prefix.startsWith(mine.slice(0, -1))));
}

/** Whether `requested` reaches nothing past `scope`. */
export function scopeWithin(scope: readonly string[], requested: readonly string[]): boolean {
  return requested.every((pattern) => patternCovered(scope, pattern));
}

/**
 * How a read is narrowed for a caller (docs/api.md "Callers and tiers": reads narrow instead of refusing and
 * set `scoped: true`). Nodes and admins holding `*` see everything; an admin with a narrower
 * scope sees what it reaches, full records; a non-admin operator sees what its key reaches
 * without fleet-owned fields, always marked scoped, even when its scope is `*`.
 */
export interface ReadView {
  /** True when the answer must carry `scoped: true`. */
  scoped: boolean;
  /** True when fleet-owned fields (application labels) are removed from the answer. */
  redact: boolean;
  /** Whether the answer may include this application. */
  reaches(application: string): boolean;
}

export function readView(caller: Caller): ReadView {
  switch (caller.kind) {
    case 'node':
      return { scoped: false, redact: false, reaches: () => true };
    case 'operator': {
      const everything = caller.applications.includes('*');
      if (caller.role === 'admin' && everything) return { scoped: false, redact: false, reaches: () => true };
      return {
        scoped: true,
        redact: caller.role !== 'admin',
        reaches: (application) => patternsReach(caller.applications, application),
      };
    }
    default:
      return { scoped: true, redact: true, reaches: (application) => scopeReaches(caller, application) };
  }
}

/**
 * Narrows a list to what the caller reaches: answers the kept items and, when the caller's
 * view is scoped, `scoped: true` to spread into the answer (`{ applications, ...scoped }`).
 */
export function narrowList<T>(
  caller: Caller,
  items: readonly T[],
  nameOf: (item: T) => string,
): { items: T[]; scoped?: true; redact: boolean } {
  const view = readView(caller);
  const kept = items.filter((item) => view.reaches(nameOf(item)));
  return view.scoped
    ? { items: kept, scoped: true, redact: view.redact }
    : { items: kept, redact: view.redact };
}

/** A short name for logs and records: `operator op-1a2b`, `node node-9f`, ... */
export function describeCaller(caller: Caller): string {
  switch (caller.kind) {
    case 'node':
    case 'operator':
      return caller.id;
    case 'workload':
      return `${caller.issuer}#${caller.subject}`;
    case 'ingress':
      return 'ingress';
  }
}
