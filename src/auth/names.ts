// Name rules the guard and the operators API check (docs/api.md "Identifiers and name rules").
// Kept apart from I/O so every caller (routes, CLI, registry) shares one definition.

import { NODE_ID_PATTERN } from '../node/node-id.ts';
import { Problem } from '../problem.ts';

const APPLICATION_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;

/** 1-63 lowercase alphanumeric characters, optionally separated by single hyphens. */
export function isApplicationName(value: unknown): value is string {
  return typeof value === 'string' && value.length >= 1 && value.length <= 63 && APPLICATION_NAME.test(value);
}

/** Refuses a value that is no application name with `invalid-slug` naming it. */
export function checkApplicationName(value: unknown, what = 'application name'): string {
  if (isApplicationName(value)) return value;
  throw new Problem(
    'invalid-slug',
    'Invalid application name',
    `${JSON.stringify(value)} is not an ${what}: 1-63 lowercase letters and digits, optionally separated by single hyphens`,
  );
}

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
