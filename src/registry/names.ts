// Every name rule in one place (docs/api.md "Identifiers and name rules"; docs/cli.md "Flag groups",
// naming an application): application names, node and operator ids, script names, binding names, and the
// client-side `--name`/`--env` resolution. Pure and free of I/O, importing nothing but the problem
// type, so the guard, the routes, the CLI, the registry and the runtime share one definition.

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
 * The application `--name` and `--env` address: `<name>`, or `<name>-<env>`. Both halves and the
 * joined result must be application names; otherwise `invalid-slug` naming both parts.
 */
export function resolveApplicationName(name: string | undefined, env?: string | undefined): string {
  if (env === undefined) {
    if (isApplicationName(name)) return name;
    throw new Problem(
      'invalid-slug',
      'Invalid application name',
      `--name ${JSON.stringify(name ?? '')} must be 1-63 lowercase letters or digits, optionally separated by single hyphens`,
    );
  }
  const joined = `${name ?? ''}-${env}`;
  if (isApplicationName(name) && isApplicationName(env) && isApplicationName(joined)) return joined;
  throw new Problem(
    'invalid-slug',
    'Invalid application name',
    `--name ${JSON.stringify(name ?? '')} and --env ${JSON.stringify(env)} must each be 1-63 lowercase letters or digits with single hyphens, and so must the joined ${JSON.stringify(joined)}`,
  );
}

/**
 * Node ids share the operators' keyspace and appear in bucket keys (node records, the runtime's
 * leases): 1-128 of [A-Za-z0-9_.-]. `isNodeId` also refuses `.` and `..`, which the pattern lets
 * through but no key segment may be.
 */
export const NODE_ID_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

export function isNodeId(value: unknown): value is string {
  return typeof value === 'string' && NODE_ID_PATTERN.test(value) && value !== '.' && value !== '..';
}

/** Refuses a value that is no node id with `invalid-slug`, naming where it came from. */
export function checkNodeId(id: string, source: string): string {
  if (isNodeId(id)) return id;
  throw new Problem(
    'invalid-slug',
    'Invalid node id',
    `${source}: ${JSON.stringify(id)} must be 1-128 ASCII letters, digits, underscores, hyphens or dots`,
  );
}

/**
 * Operator ids share one keyspace with node ids (docs/api.md), so they follow the node id rule,
 * which also keeps an id from escaping its bucket key (`_svc/operators/<id>.json`).
 */
export function isOperatorId(value: unknown): value is string {
  return isNodeId(value);
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

/** Script names that would collide with the non-script folders under the runtime's `deploy/`. */
export const RESERVED_SCRIPTS: readonly string[] = ['images', 'queues'];

/** A script name: the application-name rule (so it is safe in keys), never a reserved folder. */
export function isScriptName(value: unknown): value is string {
  return isApplicationName(value) && !RESERVED_SCRIPTS.includes(value);
}

/**
 * A binding name (`svc deploy --var`, `svc app secret`): letters, digits and underscores, not
 * starting with a digit, never a key that would reach an object's prototype.
 */
const BINDING_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const REFUSED_BINDING_NAMES = ['__proto__', 'constructor', 'prototype'];

export function isBindingName(name: string): boolean {
  return BINDING_NAME.test(name) && !REFUSED_BINDING_NAMES.includes(name);
}

export const BINDING_NAME_RULE =
  'letters, digits and underscores, not starting with a digit, never __proto__, constructor or prototype';

/**
 * An R2 bucket name, as Cloudflare's (developers.cloudflare.com/r2/buckets/create-buckets/):
 * 3-63 of lowercase letters, digits and hyphens, not starting or ending with a hyphen. It is a
 * folder name in the fleet's bucket (runtime/src/bindings/r2.ts).
 */
const R2_BUCKET_NAME = /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/;

export function isR2BucketName(value: unknown): value is string {
  return typeof value === 'string' && R2_BUCKET_NAME.test(value);
}

export const R2_BUCKET_NAME_RULE =
  '3-63 lowercase letters, digits and hyphens, not starting or ending with a hyphen';

/**
 * A D1 database name (the binding's `database_name`), as svc keeps it: 1-64 of letters, digits,
 * `_` and `-`, starting with a letter or digit. It is a folder name in the fleet's bucket
 * (runtime/src/bindings/d1.ts) and the `<db>` of `svc d1`.
 */
const D1_DATABASE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export function isD1DatabaseName(value: unknown): value is string {
  return typeof value === 'string' && D1_DATABASE_NAME.test(value);
}

export const D1_DATABASE_NAME_RULE =
  '1-64 letters, digits, underscores and hyphens, starting with a letter or digit';

/**
 * A queue name (`queues.producers[].queue`, `queues.consumers[].queue`, `dead_letter_queue`), as
 * Cloudflare Queues takes it: 1-63 lowercase letters, digits and hyphens, not starting or ending
 * with a hyphen. It is a folder name in the fleet's bucket (runtime/src/bindings/queue.ts).
 */
const QUEUE_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export function isQueueName(value: unknown): value is string {
  return typeof value === 'string' && QUEUE_NAME.test(value);
}

export const QUEUE_NAME_RULE =
  '1-63 lowercase letters, digits and hyphens, not starting or ending with a hyphen';
