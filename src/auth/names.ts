// Name rules the guard and the operators API check (docs/api.md "Identifiers and name rules").
// Kept apart from I/O so every caller (routes, CLI, registry) shares one definition. The
// application name rule is the registry's (src/registry/names.ts); auth reads it from there.

import { NODE_ID_PATTERN } from '../node/node-id.ts';
import { Problem } from '../problem.ts';
import { checkApplicationName, isApplicationName } from '../registry/names.ts';

export { checkApplicationName, isApplicationName };

/**
 * Operator ids share one keyspace with node ids (docs/api.md), so they follow the node id rule:
 * 1-128 ASCII letters, digits, underscores, hyphens or dots, never `.` or `..`. The rule
 * also keeps an id from escaping its bucket key (`_svc/operators/<id>.json`).
 */
export function isOperatorId(value: unknown): value is string {
  return typeof value === 'string' && NODE_ID_PATTERN.test(value) && value !== '.' && value !== '..';
}

/** Refuses a value that is no operator id with `invalid-slug` naming it. */
export function checkOperatorId(value: unknown, source = 'operator id'): string {
  if (isOperatorId(value)) return value;
  throw new Problem(
    'invalid-slug',
    'Invalid operator id',
    `${source} ${JSON.stringify(value)} must be 1-128 ASCII letters, digits, underscores, hyphens or dots`,
  );
}
