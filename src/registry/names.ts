// The application name rule (docs/api.md "Identifiers and name rules"), which the guard checks on
// `:name`, and docs/cli.md "Naming an application": `--name` and `--env`, resolved client-side
// (the node never sees `--env`).

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
