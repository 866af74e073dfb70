// The authentication guard of the node API (docs/api.md "Routes" tier column and
// "Callers and tiers"). Routes declare their tier in `config.auth`; the guard runs in
// `onRequest`, before any body is read, and sets `request.caller`. A route that declares
// nothing is refused (fail closed), except the 404 handler.
//
// Tiers:
//   public            no token (health)
//   ingress           an admitted ingress token only; `X-Svc-Storage-Version` absent, empty or 1
//   node-or-operator  a node or operator token
//   operator          an operator token; its record re-read on this request; node token → auth-scope
//   admin             as operator, and role admin (scope on `:name` checked first, then the tier)
//   deploy            a node, operator or workload token (workload: src/auth/workload.ts)
//   operator-or-workload  an operator token (re-read, as above) or a workload token; node → auth-scope
// On every route with a `:name` parameter the name must be an application name
// (`invalid-slug`) and the caller's scope must reach it (`auth-scope`), before any handler I/O.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { checkApplicationName, isApplicationName } from '../registry/names.ts';
import type { Store } from '../store/store.ts';
import { type Caller, requireScope } from './caller.ts';
import { asTrustedOperator, type TrustedOperator } from './records.ts';
import type { AuthState } from './state.ts';
import { authInvalid, bearerToken } from './token.ts';
import { isReadMethod, recordTokenUse } from './token-uses.ts';
import { readJson } from './verifier.ts';
import { isWorkloadToken, type WorkloadCaller } from './workload.ts';

export type AuthLevel =
  | 'public'
  | 'ingress'
  | 'node-or-operator'
  | 'operator'
  | 'admin'
  | 'deploy'
  | 'operator-or-workload';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthLevel;
  }
  interface FastifyRequest {
    /** Who is calling; set by the guard before any handler runs (unset on public routes). */
    caller: Caller;
  }
}

/** The operator record the guard read for this request (operator and admin routes re-read it). */
const operatorRecords = new WeakMap<FastifyRequest, TrustedOperator>();

/** The verified caller's operator record as this request read it; undefined for other callers. */
export function operatorRecordOf(request: FastifyRequest): TrustedOperator | undefined {
  return operatorRecords.get(request);
}

/**
 * What the guard needs, and nothing of the daemon (the way Hono's bearer-auth takes a
 * `verifyToken` callback); src/node/server.ts wires them from the daemon's context.
 */
export interface GuardDeps {
  /** Where operator records are re-read and token uses recorded. */
  store: Store;
  log: Pick<Logger, 'error' | 'debug'>;
  /** The verifier and the admitted ingress tokens, asked per request: they are set up at boot. */
  auth(): AuthState;
  /** Verifies a workload token for `application` (src/auth/workload.ts). */
  verifyWorkloadToken(token: string, application: string | null): Promise<WorkloadCaller>;
}

/** The verified caller the guard attached, for a handler of a route that declares a tier. */
export function callerOf(request: FastifyRequest): Caller {
  const caller = (request as FastifyRequest & { caller?: Caller }).caller;
  // The guard runs for every route that declares `config.auth`; a missing caller is a wiring bug.
  if (!caller)
    throw new Problem('internal', 'Internal error', 'the request reached a handler unauthenticated');
  return caller;
}

const LEVELS = new Set<string>([
  'public',
  'ingress',
  'node-or-operator',
  'operator',
  'admin',
  'deploy',
  'operator-or-workload',
]);
/** Tiers whose operator callers have their record re-read on every request; node tokens are refused. */
const OPERATOR_TIERS = new Set<string>(['operator', 'admin', 'operator-or-workload']);

/** Installs the guard on the root instance; buildServer calls it before any route plugin. */
export function authGuard(app: FastifyInstance, deps: GuardDeps): void {
  app.decorateRequest('caller', null as never);
  app.addHook('onRoute', (route) => {
    const level = (route.config as { auth?: string } | undefined)?.auth;
    if (!level || !LEVELS.has(level)) {
      deps.log.error(
        { method: route.method, url: route.url },
        'route declares no auth tier; it refuses every call',
      );
    }
  });
  app.addHook('onRequest', async (request) => {
    const caller = await authenticate(request, deps);
    if (caller) request.caller = caller;
  });
}

/** Authenticates one request against its route's tier; null for public routes and the 404 handler. */
export async function authenticate(request: FastifyRequest, deps: GuardDeps): Promise<Caller | null> {
  if (request.is404) return null;
  const level = (request.routeOptions.config as { auth?: string } | undefined)?.auth;
  switch (level) {
    case 'public':
      return null;
    case 'ingress':
      return authenticateIngress(request, deps);
    case 'node-or-operator':
    case 'operator':
    case 'admin':
    case 'deploy':
    case 'operator-or-workload':
      return authenticateSigned(request, deps, level);
    default:
      deps.log.error({ url: request.url }, 'refused a call to a route that declares no auth tier');
      throw new Problem(
        'internal',
        'Route not guarded',
        'this route declares no authentication; see the node log',
      );
  }
}

function authenticateIngress(request: FastifyRequest, deps: GuardDeps): Caller {
  const tokens = deps.auth().ingress;
  if (!tokens?.admits(bearerToken(request.headers.authorization))) throw authInvalid();
  const version = request.headers['x-svc-storage-version'];
  if (version !== undefined && version !== '' && version !== '1') {
    throw new Problem(
      'invalid-input',
      'Unsupported storage protocol version',
      `X-Svc-Storage-Version ${JSON.stringify(version)}; this node speaks 1`,
    );
  }
  return { kind: 'ingress' };
}

async function authenticateSigned(
  request: FastifyRequest,
  deps: GuardDeps,
  level: 'node-or-operator' | 'operator' | 'admin' | 'deploy' | 'operator-or-workload',
): Promise<Caller> {
  const token = bearerToken(request.headers.authorization);
  if (token === null) throw authInvalid();
  const name = nameParam(request);

  let caller: Caller;
  let used: { jti: string; exp: number } | null = null;
  if (isWorkloadToken(token)) {
    caller = await deps.verifyWorkloadToken(token, applicationOf(request));
    // Verified, but workload tokens reach the deploy and secret routes only (docs/api.md): like a
    // node token on an operator route, the answer is auth-scope, not auth-invalid.
    if (level !== 'deploy' && level !== 'operator-or-workload') throw workloadOutOfReach();
  } else {
    const verifier = deps.auth().verifier;
    const signer = await verifier.verify(token);
    used = signer.token;
    if (signer.kind === 'node') {
      if (OPERATOR_TIERS.has(level)) throw operatorRequired();
      caller = { kind: 'node', id: signer.id };
    } else {
      let record: TrustedOperator = signer.record;
      if (OPERATOR_TIERS.has(level)) {
        // docs/api.md: operator routes re-read the operator record on every request, so a revoked
        // key or a changed grant takes effect at once here, not after the key cache expires.
        const fresh = asTrustedOperator(await readJson(deps.store, keys.operator(signer.id)), signer.id);
        if (!fresh || fresh.publicKey.x !== record.publicKey.x) {
          verifier.forget(signer.id);
          throw authInvalid();
        }
        record = fresh;
      }
      operatorRecords.set(request, record);
      caller = { kind: 'operator', id: record.id, role: record.role, applications: [...record.applications] };
    }
  }

  if (name !== undefined) {
    checkApplicationName(name);
    requireScope(caller, name);
  }
  if (level === 'admin' && !(caller.kind === 'operator' && caller.role === 'admin')) {
    throw new Problem('auth-scope', 'Admin key required', 'this route answers admin operator keys only');
  }
  if (used && (await recordTokenUse(deps.store, used, !isReadMethod(request.method))) === 'replayed') {
    deps.log.debug({ reason: 'jti recorded by another request of the fleet' }, 'token rejected');
    throw authInvalid();
  }
  return caller;
}

function workloadOutOfReach(): Problem {
  return new Problem(
    'auth-scope',
    'Operator key required',
    'workload tokens reach the deploy and secret routes only; sign with an operator key',
  );
}

function operatorRequired(): Problem {
  return new Problem(
    'auth-scope',
    'Operator key required',
    'node tokens do not reach this route; sign with an operator key',
  );
}

function nameParam(request: FastifyRequest): string | undefined {
  const params = request.params as Record<string, unknown> | undefined;
  if (!params || !Object.hasOwn(params, 'name')) return undefined;
  return typeof params.name === 'string' ? params.name : '';
}

/**
 * The application a request is about, for workload tokens: `:name`, or the application half
 * of a deploy id `<name>.<16 hex>` in `:id`; null when it names none.
 */
export function applicationOf(request: FastifyRequest): string | null {
  const params = (request.params ?? {}) as Record<string, unknown>;
  if (typeof params.name === 'string') return isApplicationName(params.name) ? params.name : null;
  if (typeof params.id === 'string') {
    const match = /^(.+)\.[0-9a-f]{16}$/.exec(params.id);
    if (match && isApplicationName(match[1])) return match[1]!;
  }
  return null;
}
