// The request bodies of the application routes (docs/api.md "Applications"):
// labels, selector and replicas, each parsed or refused with `invalid-input` naming the member
// and an example. `parseReplicas` also reads `svc deploy --replicas`.

import { invalidInput } from '../problem.ts';
import type { Replicas } from './records.ts';

/** `{ labels: object of string values }`. */
export function parseLabelsBody(body: unknown): Record<string, string> {
  const labels = memberOf(body, 'labels', 'Invalid labels', '{"labels": {"key": "value"}}');
  if (!isStringMap(labels)) {
    throw invalidInput(
      'Invalid labels',
      '`labels` must be an object whose values are strings; {} clears them',
    );
  }
  return labels;
}

/** `{ selector: object string to string | null }`; omission is refused. */
export function parseSelectorBody(body: unknown): Record<string, string> | null {
  const selector = memberOf(
    body,
    'selector',
    'Invalid selector',
    '{"selector": {"key": "value"}} or {"selector": null}',
  );
  if (selector === null) return null;
  if (!isStringMap(selector)) {
    throw invalidInput(
      'Invalid selector',
      '`selector` must be an object whose values are strings, or null to clear it',
    );
  }
  return selector;
}

/** `{ replicas: 'all' | whole number >= 1 }`; null or omission is refused (there is no default). */
export function parseReplicasBody(body: unknown): Replicas {
  const replicas = memberOf(body, 'replicas', 'Invalid replicas', '{"replicas": "all"} or {"replicas": 3}');
  const parsed = parseReplicas(replicas);
  if (parsed === null) {
    throw invalidInput(
      'Invalid replicas',
      `\`replicas\` must be "all" or a whole number >= 1, got ${describe(replicas)}`,
    );
  }
  return parsed;
}

/** `all` or a whole number >= 1 (as a JSON number); null for anything else. */
export function parseReplicas(value: unknown): Replicas | null {
  if (value === 'all') return 'all';
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1) return value;
  return null;
}

function memberOf(body: unknown, member: string, title: string, example: string): unknown {
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidInput(title, `send a JSON object such as ${example}`);
  }
  if (!Object.hasOwn(body, member) || (body as Record<string, unknown>)[member] === undefined) {
    throw invalidInput(title, `\`${member}\` is required, e.g. ${example}`);
  }
  return (body as Record<string, unknown>)[member];
}

function isStringMap(value: unknown): value is Record<string, string> {
  return (
    !!value &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.values(value).every((entry) => typeof entry === 'string')
  );
}

function describe(value: unknown): string {
  return value === undefined ? 'nothing' : JSON.stringify(value);
}
