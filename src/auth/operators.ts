// Trusted operator keys (docs/api.md "Operator keys"; docs/cli.md "svc operator" for the bucket path):
// who may register which key with which tier and scope, lineage views, revocation, and
// the bucket ceremony that seeds and recovers admins. Records live at
// `_svc/operators/<id>.json` and every write to them is conditional.

import { Problem } from '../problem.ts';
import { markFleetChanged } from '../registry/changes.ts';
import { keys } from '../registry/keys.ts';
import { isApplicationName, isOperatorId } from '../registry/names.ts';
import { parseJsonBody, type Store } from '../store/store.ts';
import { updateJson } from '../store/update.ts';
import { type OperatorCaller, type Role, scopeWithin } from './caller.ts';
import { asPublicJwk, type PublicJwk } from './ed25519.ts';
import { asTrustedOperator, type TrustedOperator } from './records.ts';
import { readJson } from './verifier.ts';

/** `registeredBy` of keys written straight to the bucket. */
export const BUCKET_REGISTRAR = 'bucket';

/** A registration body (docs/api.md `POST /v1/operators`), checked for shape. */
export interface Registration {
  id: string;
  publicKey: PublicJwk;
  role?: Role;
  supersedes?: string;
  applications?: string[];
}

const malformed = (detail: string) => new Problem('invalid-input', 'Malformed request', detail);

/** Checks a registration body's shape; tier and scope are judged against the caller later. */
export function parseRegistration(body: unknown): Registration {
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw malformed('the body must be a JSON object with id and publicKey');
  }
  const { id, publicKey, role, supersedes, applications } = body as Record<string, unknown>;
  if (typeof id !== 'string' || id === '') throw malformed('id must be a non-empty string');
  if (!isOperatorId(id)) {
    throw new Problem(
      'invalid-slug',
      'Invalid operator id',
      `id ${JSON.stringify(id)} must be 1-128 ASCII letters, digits, underscores, hyphens or dots`,
    );
  }
  const jwk = asPublicJwk(publicKey);
  if (!jwk) {
    throw new Problem(
      'invalid-input',
      'Invalid public key',
      "publicKey must be { kty: 'OKP', crv: 'Ed25519', x: <32 bytes, base64url> }",
    );
  }
  if (role !== undefined && role !== 'admin' && role !== 'operator') {
    throw malformed('role must be "admin" or "operator"');
  }
  if (supersedes !== undefined && (typeof supersedes !== 'string' || supersedes === '')) {
    throw malformed('supersedes must be the id of the key signing this request');
  }
  const registration: Registration = { id, publicKey: jwk };
  if (role !== undefined) registration.role = role;
  if (supersedes !== undefined) registration.supersedes = supersedes as string;
  if (applications !== undefined) registration.applications = checkScopePatterns(applications);
  return registration;
}

/**
 * Scope patterns: `['*']` alone, or exact application names and prefix globs such as
 * `shop-*`. An empty list, `*` beside names, or `*` anywhere but one trailing character is
 * refused (`invalid-input`).
 */
export function checkScopePatterns(value: unknown): string[] {
  if (!Array.isArray(value)) throw malformed('applications must be an array of names or prefix globs');
  if (value.length === 0) throw malformed('applications must not be empty');
  const patterns: string[] = [];
  for (const item of value) {
    if (typeof item !== 'string') throw malformed('applications must hold strings');
    if (!isScopePattern(item)) {
      throw new Problem(
        'invalid-input',
        'Invalid application scope',
        `${JSON.stringify(item)} is no application name, prefix glob such as shop-*, or *`,
      );
    }
    if (!patterns.includes(item)) patterns.push(item);
  }
  if (patterns.includes('*') && patterns.length > 1) {
    throw new Problem(
      'invalid-input',
      'Invalid application scope',
      '* grants every application; give it alone',
    );
  }
  return patterns;
}

/** `*`; an application name; or a name prefix (possibly ending in `-`) followed by one `*`. */
export function isScopePattern(pattern: string): boolean {
  if (pattern === '*') return true;
  if (!pattern.endsWith('*')) return isApplicationName(pattern);
  const prefix = pattern.slice(0, -1);
  return prefix.length <= 62 && /^[a-z0-9]+(-[a-z0-9]+)*-?$/.test(prefix);
}

/**
 * Judges a registration against its caller (docs/api.md "Operator keys") and answers the record to
 * write. Refusals: `supersedes` naming anyone but the caller, a tier the caller may not grant,
 * a scope past the caller's, `*` handed out by a non-admin, a fresh grant without a scope.
 */
export function decideRegistration(
  caller: OperatorCaller,
  registration: Registration,
  now: Date = new Date(),
): TrustedOperator {
  const { id, publicKey, supersedes } = registration;
  if (supersedes !== undefined && supersedes !== caller.id) {
    throw new Problem(
      'auth-scope',
      'Not your key to replace',
      'supersedes must name the key signing this request',
    );
  }
  const replacement = supersedes !== undefined;
  if (replacement && id === caller.id) {
    throw new Problem('invalid-input', 'A key cannot replace itself', 'register the new key under a new id');
  }
  const role: Role = registration.role ?? (replacement ? caller.role : 'operator');
  if (role === 'admin' && caller.role !== 'admin') {
    throw new Problem('auth-scope', 'Tier not grantable', 'only admin keys register admin keys');
  }
  let applications = registration.applications;
  if (applications === undefined) {
    if (!replacement) {
      throw new Problem(
        'invalid-input',
        'Scope required',
        'a fresh key needs an explicit applications list (names, prefix globs such as shop-*, or *)',
      );
    }
    applications = [...caller.applications];
  }
  // An operator-tier key may replace itself with a wildcard key, never hand one out beside itself.
  if (applications.includes('*') && caller.role !== 'admin' && !replacement) {
    throw new Problem('auth-scope', 'Wildcard not grantable', 'only admin keys grant every application (*)');
  }
  if (!scopeWithin(caller.applications, applications)) {
    throw new Problem(
      'auth-scope',
      'Scope past your own',
      'the requested applications reach past what the signing key reaches',
    );
  }
  const record: TrustedOperator = {
    v: 1,
    id,
    publicKey,
    role,
    applications,
    registeredAt: now.toISOString(),
    registeredBy: caller.id,
  };
  if (supersedes !== undefined) record.supersedes = supersedes;
  return record;
}

/** Whether two records grant the same key the same thing (registration is idempotent on it). */
export function sameGrant(a: TrustedOperator, b: TrustedOperator): boolean {
  const sorted = (list: readonly string[]) => [...list].sort().join('\n');
  return (
    a.publicKey.x === b.publicKey.x &&
    a.role === b.role &&
    sorted(a.applications) === sorted(b.applications) &&
    a.supersedes === b.supersedes
  );
}

function idTaken(id: string): Problem {
  return new Problem(
    'reference-held',
    'Operator id taken',
    `${JSON.stringify(id)} is already registered with another key or grant; choose another id`,
  );
}

/**
 * Writes a decided record: answers the stored record when an identical grant is already
 * there (idempotent), refuses an id held by another key, grant or node.
 */
export async function writeOperator(store: Store, record: TrustedOperator): Promise<TrustedOperator> {
  if ((await readJson(store, keys.nodeKey(record.id))) !== undefined) {
    throw new Problem(
      'reference-held',
      'Operator id taken',
      `${JSON.stringify(record.id)} is a node id; node and operator ids share one keyspace`,
    );
  }
  const updated = await updateJson<TrustedOperator | null>(
    store,
    keys.operator(record.id),
    (existing) => {
      if (!existing) return { put: record };
      // The same grant again is answered as stored; anything else there (unreadable too) holds the id.
      if (existing.value && sameGrant(existing.value, record)) return null;
      throw idTaken(record.id);
    },
    { parse: (body) => parseOperator(body, record.id) },
  );
  if (updated.changed) await markFleetChanged(store, `operator ${record.id}`);
  return updated.value!;
}

/** One operator record with its ETag; null when absent or unreadable. */
export async function readOperator(
  store: Store,
  id: string,
): Promise<{ record: TrustedOperator; etag: string } | null> {
  const object = await store.get(keys.operator(id));
  const record = object && parseOperator(object.body, id);
  return record ? { record, etag: object.etag } : null;
}

/** A stored operator record; null when it is not JSON or not a record for `id`. */
function parseOperator(body: Uint8Array, id: string): TrustedOperator | null {
  try {
    return asTrustedOperator(parseJsonBody(body), id);
  } catch {
    return null;
  }
}

/** Every readable operator record, in id order. */
export async function listOperators(store: Store): Promise<TrustedOperator[]> {
  const listing = await store.list(keys.operatorsPrefix, { recursive: false });
  const ids = listing.objects
    .map((object) => object.key.slice(keys.operatorsPrefix.length))
    .filter((name) => name.endsWith('.json'))
    .map((name) => name.slice(0, -'.json'.length))
    .filter(isOperatorId);
  const records = await Promise.all(ids.map((id) => readOperator(store, id)));
  return records
    .filter((entry) => entry !== null)
    .map((entry) => entry.record)
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** A non-admin's view (docs/api.md): itself, the key it supersedes, any key that supersedes it. */
export function lineage(self: TrustedOperator, all: readonly TrustedOperator[]): TrustedOperator[] {
  return all.filter(
    (record) => record.id === self.id || record.id === self.supersedes || record.supersedes === self.id,
  );
}

/**
 * Revokes a key (docs/api.md `DELETE /v1/operators/:id`). Refusals: own key (`invalid-input`);
 * an operator-tier key revoking anything but the key it was registered to replace
 * (`auth-scope`); missing key (`not-found`); the last key or the last admin key
 * (`reference-held`). The delete is conditional on the record read.
 */
export async function revokeOperator(
  store: Store,
  caller: OperatorCaller,
  callerRecord: TrustedOperator,
  id: string,
): Promise<void> {
  if (id === caller.id) {
    throw new Problem(
      'invalid-input',
      'Cannot revoke your own key',
      'a key never revokes itself; rotate instead (svc operator rotate)',
    );
  }
  if (caller.role !== 'admin' && callerRecord.supersedes !== id) {
    throw new Problem(
      'auth-scope',
      'Not your key to revoke',
      'an operator-tier key may revoke only the key it was registered to replace',
    );
  }
  const updated = await updateJson<TrustedOperator | null>(
    store,
    keys.operator(id),
    async (target) => {
      if (!target?.value) {
        throw new Problem(
          'not-found',
          'No such operator key',
          `no key is registered as ${JSON.stringify(id)}`,
        );
      }
      // Read again on every attempt: the keys left decide whether this one may go.
      const others = (await listOperators(store)).filter((record) => record.id !== id);
      if (others.length === 0) {
        throw new Problem(
          'reference-held',
          'Last operator key',
          'the fleet must keep at least one trusted operator key',
        );
      }
      if (target.value.role === 'admin' && !others.some((record) => record.role === 'admin')) {
        throw new Problem('reference-held', 'Last admin key', 'the fleet must keep at least one admin key');
      }
      return { delete: true };
    },
    { parse: (body) => parseOperator(body, id) },
  );
  if (updated.changed) await markFleetChanged(store, `operator ${id}`);
}

/**
 * The bucket ceremony (docs/cli.md `svc operator keygen --register`, `remote add --register`,
 * `operator enroll` with bucket flags): authorized by the bucket credential, it seeds and
 * recovers admins only, never scoped: the key becomes an admin reaching every application.
 * A key already registered under the id is promoted in place; another key there is refused.
 */
export async function registerThroughBucket(
  store: Store,
  id: string,
  publicKey: PublicJwk,
  now: Date = new Date(),
): Promise<TrustedOperator> {
  if ((await readJson(store, keys.nodeKey(id))) !== undefined) {
    throw new Problem(
      'reference-held',
      'Operator id taken',
      `${JSON.stringify(id)} is a node id; node and operator ids share one keyspace`,
    );
  }
  const record: TrustedOperator = {
    v: 1,
    id,
    publicKey,
    role: 'admin',
    applications: ['*'],
    registeredAt: now.toISOString(),
    registeredBy: BUCKET_REGISTRAR,
  };
  const updated = await updateJson<TrustedOperator | null>(
    store,
    keys.operator(id),
    (existing) => {
      const held = existing?.value;
      if (held && held.publicKey.x !== publicKey.x) throw idTaken(id);
      const { role, applications } = held ?? {};
      if (held && role === 'admin' && applications?.length === 1 && applications[0] === '*') return null;
      // An unreadable record at the id is replaced, on its ETag.
      return { put: record };
    },
    { parse: (body) => parseOperator(body, id) },
  );
  if (updated.changed) await markFleetChanged(store, `operator ${id}`);
  return updated.value!;
}
