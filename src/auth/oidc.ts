// Workload OIDC tokens (docs/deploys.md "Workload identity"): a CI job's identity token,
// accepted on the deploy routes only, for an application whose trust policy names its `iss`.
//
//   1. The token is split without verifying it; its `alg` must be in the table (RS, PS, ES at
//      256/384/512, EdDSA, Ed25519): the HS* family and anything else are refused outright.
//   2. The unsigned `iss` is matched against the application's trust policy before anything is
//      fetched: an issuer the policy does not name is `auth-invalid`, and nothing is fetched.
//   3. The issuer's keys: OpenID discovery (`<iss>/.well-known/openid-configuration`, whose
//      `issuer` must equal `iss`), then its `jwks_uri` through jose's createRemoteJWKSet. Both
//      are cached 300 s; a failed fetch backs the issuer off for 30 s; one request may take 5 s;
//      at most 64 issuers are kept (least recently used goes first).
//   4. Signature, `iss`, `exp` (required), `nbf`, `iat` with 30 s of skew. Any failure so far is
//      `auth-invalid`.
//   5. The verified token against the policy: an entry for its issuer whose audience the token
//      carries and one of whose subject patterns matches `sub`. Otherwise `trust-mismatch`, whose
//      detail ends with the `svc trust add` command that would admit it.

import {
  createRemoteJWKSet,
  customFetch,
  decodeJwt,
  decodeProtectedHeader,
  type JWTVerifyGetKey,
  jwtVerify,
} from 'jose';
import { Problem } from '../problem.ts';
import {
  isLoopbackHost,
  judgeToken,
  namesIssuer,
  readTrustPolicy,
  type TrustPolicy,
} from '../registry/trust.ts';
import type { Store } from '../store/store.ts';
import type { Caller } from './caller.ts';
import type { VerifierDeps } from './state.ts';
import { authInvalid } from './token.ts';

export type WorkloadCaller = Extract<Caller, { kind: 'workload' }>;

/** docs/deploys.md "Workload identity". */
export const WORKLOAD_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;
export const JWKS_CACHE_MS = 300_000;
export const JWKS_BACKOFF_MS = 30_000;
export const JWKS_REQUEST_MS = 5_000;
export const MAX_ISSUERS = 64;
export const WORKLOAD_SKEW_S = 30;
/** Tokens beyond this are refused before anything is decoded (GitHub's are about 1.2 KB). */
export const MAX_WORKLOAD_TOKEN_CHARS = 16_384;
/** A discovery document beyond this is not read. */
const MAX_DISCOVERY_BYTES = 64 * 1024;

export interface WorkloadVerifierOptions {
  /** The trust policy of an application; defaults to reading the bucket. */
  loadPolicy: (application: string) => Promise<TrustPolicy | null>;
  now?: () => number;
  fetch?: typeof fetch;
  cacheMs?: number;
  backoffMs?: number;
  requestMs?: number;
  maxIssuers?: number;
  /** The private reason of each rejection, for the node's debug log. */
  onReject?: (reason: string) => void;
}

interface IssuerEntry {
  /** Key resolver; absent until discovery succeeded. */
  keys?: JWTVerifyGetKey;
  /** When discovery (and so the key resolver) must be redone. */
  freshUntil: number;
  /** While set and ahead, nothing is fetched for this issuer. */
  backoffUntil: number;
  pending?: Promise<JWTVerifyGetKey>;
}

class Rejected extends Error {}

export class WorkloadVerifier {
  readonly #options: Required<Omit<WorkloadVerifierOptions, 'onReject'>> &
    Pick<WorkloadVerifierOptions, 'onReject'>;
  readonly #issuers = new Map<string, IssuerEntry>();
  /** How many HTTP requests this verifier made (discovery and JWKS); for tests and metrics. */
  requests = 0;

  constructor(options: WorkloadVerifierOptions) {
    this.#options = {
      now: Date.now,
      fetch: globalThis.fetch,
      cacheMs: JWKS_CACHE_MS,
      backoffMs: JWKS_BACKOFF_MS,
      requestMs: JWKS_REQUEST_MS,
      maxIssuers: MAX_ISSUERS,
      ...options,
    };
  }

  /** Issuers currently cached, least recently used first. */
  get cachedIssuers(): string[] {
    return [...this.#issuers.keys()];
  }

  /**
   * Verifies a workload token for `application` (null when the request names none). Answers the
   * caller, or throws `auth-invalid` or `trust-mismatch`.
   */
  async verify(token: string, application: string | null): Promise<WorkloadCaller> {
    let claims: { issuer: string; subject: string; audiences: string[] };
    let policy: TrustPolicy | null;
    try {
      if (application === null) throw new Rejected('the request names no application');
      const unsigned = this.#split(token);
      policy = await this.#options.loadPolicy(application);
      if (!namesIssuer(policy, unsigned.iss)) {
        throw new Rejected(`the trust policy of ${application} does not name issuer ${unsigned.iss}`);
      }
      claims = await this.#verifySigned(token, unsigned.iss);
    } catch (err) {
      if (err instanceof Rejected) {
        this.#options.onReject?.(err.message);
        throw authInvalid();
      }
      throw err;
    }
    if (judgeToken(policy, claims) !== 'admitted') {
      throw trustMismatch(application, claims);
    }
    return { kind: 'workload', issuer: claims.issuer, subject: claims.subject, application };
  }

  /** The unverified header and `iss`; the algorithm is judged here, before any I/O. */
  #split(token: string): { iss: string } {
    if (typeof token !== 'string' || token.length > MAX_WORKLOAD_TOKEN_CHARS)
      throw new Rejected('token too long');
    let header: { alg?: unknown };
    let payload: { iss?: unknown };
    try {
      header = decodeProtectedHeader(token);
      payload = decodeJwt(token);
    } catch {
      throw new Rejected('not a compact JWS');
    }
    if (typeof header.alg !== 'string' || !(WORKLOAD_ALGORITHMS as readonly string[]).includes(header.alg)) {
      throw new Rejected(`alg ${String(header.alg)} refused`);
    }
    if (typeof payload.iss !== 'string' || payload.iss === '') throw new Rejected('iss missing');
    return { iss: payload.iss };
  }

  async #verifySigned(
    token: string,
    issuer: string,
  ): Promise<{ issuer: string; subject: string; audiences: string[] }> {
    const keys = await this.#keysFor(issuer);
    let payload: Awaited<ReturnType<typeof jwtVerify>>['payload'];
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer,
        algorithms: [...WORKLOAD_ALGORITHMS],
        clockTolerance: WORKLOAD_SKEW_S,
        requiredClaims: ['exp', 'sub'],
        currentDate: new Date(this.#options.now()),
      }));
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      // The key set could not be fetched (timeout, network, not 200, not a key set): back the
      // issuer off. A token that merely fails to verify changes nothing.
      if (['', 'ERR_JWKS_TIMEOUT', 'ERR_JOSE_GENERIC', 'ERR_JWKS_INVALID'].includes(code))
        this.#backOff(issuer);
      throw new Rejected(`token did not verify: ${code || (err as Error).message}`);
    }
    if (typeof payload.sub !== 'string' || payload.sub === '') throw new Rejected('sub missing');
    const aud = payload.aud;
    const audiences =
      typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud.filter((a) => typeof a === 'string') : [];
    return { issuer, subject: payload.sub, audiences };
  }

  /** The key resolver of an issuer: cached, backed off after a failure, discovered once at a time. */
  async #keysFor(issuer: string): Promise<JWTVerifyGetKey> {
    const now = this.#options.now();
    let entry = this.#issuers.get(issuer);
    if (entry) {
      // Most recently used goes last: eviction takes the first.
      this.#issuers.delete(issuer);
      this.#issuers.set(issuer, entry);
      if (entry.keys && entry.freshUntil > now) return entry.keys;
      if (entry.backoffUntil > now) throw new Rejected(`issuer ${issuer} backed off after a failed fetch`);
      if (entry.pending) return entry.pending;
    } else {
      entry = { freshUntil: 0, backoffUntil: 0 };
      while (this.#issuers.size >= this.#options.maxIssuers) {
        const oldest = this.#issuers.keys().next().value;
        if (oldest === undefined) break;
        this.#issuers.delete(oldest);
      }
      this.#issuers.set(issuer, entry);
    }
    const current = entry;
    current.pending = this.#discover(issuer)
      .then((keys) => {
        current.keys = keys;
        current.freshUntil = this.#options.now() + this.#options.cacheMs;
        return keys;
      })
      .catch((err) => {
        current.keys = undefined;
        current.backoffUntil = this.#options.now() + this.#options.backoffMs;
        throw err instanceof Rejected ? err : new Rejected(`discovery failed: ${(err as Error).message}`);
      })
      .finally(() => {
        current.pending = undefined;
      });
    return current.pending;
  }

  #backOff(issuer: string): void {
    const entry = this.#issuers.get(issuer);
    if (entry) {
      entry.keys = undefined;
      entry.backoffUntil = this.#options.now() + this.#options.backoffMs;
    }
  }

  async #discover(issuer: string): Promise<JWTVerifyGetKey> {
    const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    this.requests++;
    const response = await this.#options.fetch(url, {
      redirect: 'error',
      signal: AbortSignal.timeout(this.#options.requestMs),
      headers: { accept: 'application/json' },
    });
    if (response.status !== 200) throw new Rejected(`discovery answered ${response.status}`);
    const text = await boundedText(response, MAX_DISCOVERY_BYTES);
    let document: { issuer?: unknown; jwks_uri?: unknown };
    try {
      document = JSON.parse(text);
    } catch {
      throw new Rejected('discovery document is not JSON');
    }
    if (document?.issuer !== issuer) throw new Rejected('discovery document names another issuer');
    if (typeof document.jwks_uri !== 'string') throw new Rejected('discovery document has no jwks_uri');
    let jwksUrl: URL;
    try {
      jwksUrl = new URL(document.jwks_uri);
    } catch {
      throw new Rejected('jwks_uri is not a URL');
    }
    if (
      jwksUrl.protocol !== 'https:' &&
      !(jwksUrl.protocol === 'http:' && isLoopbackHost(jwksUrl.hostname))
    ) {
      throw new Rejected('jwks_uri is not https');
    }
    const fetchImpl = this.#options.fetch;
    const counted: typeof fetch = (input, init) => {
      this.requests++;
      return fetchImpl(input, init);
    };
    return createRemoteJWKSet(jwksUrl, {
      timeoutDuration: this.#options.requestMs,
      cooldownDuration: this.#options.backoffMs,
      cacheMaxAge: this.#options.cacheMs,
      [customFetch]: counted,
    } as Parameters<typeof createRemoteJWKSet>[1]);
  }
}

async function boundedText(response: Response, limit: number): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > limit) {
      await reader.cancel();
      throw new Rejected('discovery document too large');
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The refusal for a verified token the policy does not admit; ends with the command that would. */
export function trustMismatch(
  application: string,
  claims: { issuer: string; subject: string; audiences: string[] },
): Problem {
  const audience = claims.audiences[0];
  const audienceFlag = audience && audience !== 'svc' ? ` --audience ${shellQuote(audience)}` : '';
  return new Problem(
    'trust-mismatch',
    'Workload not trusted',
    `the token of ${claims.issuer} for subject ${JSON.stringify(claims.subject)} (audience ${JSON.stringify(
      claims.audiences.join(' '),
    )}) is not admitted by the trust policy of "${application}"; to trust it: svc trust add --name ${application} --issuer ${shellQuote(
      claims.issuer,
    )} --subject ${shellQuote(claims.subject)}${audienceFlag}`,
  );
}

function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:@=+,-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

/** One verifier per running node: its issuer cache is shared by every request. */
const verifiers = new WeakMap<object, WorkloadVerifier>();

/** The verifier of one owner (the daemon's context): created on first use, kept while the owner lives. */
export function workloadVerifierFor(ctx: VerifierDeps): WorkloadVerifier {
  let verifier = verifiers.get(ctx);
  if (!verifier) {
    const store: Store = ctx.store;
    verifier = new WorkloadVerifier({
      loadPolicy: (application) => readTrustPolicy(store, application),
      onReject: (reason) => ctx.log.debug({ reason }, 'workload token rejected'),
    });
    verifiers.set(ctx, verifier);
  }
  return verifier;
}
