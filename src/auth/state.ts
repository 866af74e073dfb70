// The daemon's authentication state (docs/api.md "Callers and tiers"): the one token verifier
// (its key cache and replay set must be shared by every route) and the admitted ingress
// tokens. The daemon keeps it in its context (src/node/identity-service.ts); auth itself takes
// only the store and a log.

import type { Logger } from 'pino';
import type { Store } from '../store/store.ts';
import type { IngressTokens } from './ingress-token.ts';
import { TokenVerifier } from './verifier.ts';

export interface AuthState {
  verifier: TokenVerifier;
  /** null: no ingress token is admitted, so the ingress routes answer nobody. */
  ingress: IngressTokens | null;
}

/** What a verifier is built over: the bucket its keys are read from, and where rejections are logged. */
export interface VerifierDeps {
  store: Store;
  log: Pick<Logger, 'debug'>;
}

export function createVerifier(deps: VerifierDeps): TokenVerifier {
  return new TokenVerifier({
    store: deps.store,
    onReject: (reason) => deps.log.debug({ reason }, 'token rejected'),
  });
}
