// Workload OIDC tokens (docs/deploys.md "Workload identity"): accepted on the deploy routes only,
// for an application whose trust policy names the token's `iss`. THE SEAM: the guard calls
// `verifyWorkloadToken` for every bearer token on a `deploy` route that carries an `iss`
// claim (node and operator tokens never do). The verification itself (issuer selection from the
// trust policy, discovery and JWKS caching, the algorithm table, trust-mismatch) is in oidc.ts.

import type { Caller } from './caller.ts';
import type { VerifierDeps } from './state.ts';

export type WorkloadCaller = Extract<Caller, { kind: 'workload' }>;

/**
 * Verifies a workload token for `application` (null when the request names none, such as a
 * poll of a malformed deploy id), with the verifier of `owner` (its issuer cache lives as long
 * as `owner`, the daemon's context). Answers the caller, or throws `auth-invalid` (token does not
 * hold up) or `trust-mismatch` (verified, but the policy admits neither issuer nor subject).
 */
export async function verifyWorkloadToken(
  owner: VerifierDeps,
  token: string,
  application: string | null,
): Promise<WorkloadCaller> {
  // jose and the verifier are loaded with the first workload token: most nodes never see one,
  // and a daemon keeps every module it loaded for as long as it runs.
  const { workloadVerifierFor } = await import('./oidc.ts');
  return workloadVerifierFor(owner).verify(token, application);
}

/**
 * Whether a bearer token is a workload token: its unsigned payload carries `iss`. Node and
 * operator tokens never carry one, so the choice needs no key and no I/O; whichever path is
 * taken still verifies the signature.
 */
export function isWorkloadToken(token: string): boolean {
  const payload = token.split('.')[1];
  if (!payload || payload.length > 16_384) return false;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    return !!claims && typeof claims === 'object' && 'iss' in claims;
  } catch {
    return false;
  }
}
