// The daemon's authentication state (docs/api.md "Authentication"): the one token verifier
// (its key cache and replay set must be shared by every route) and the admitted ingress
// tokens. The identity service sets it up at boot; an in-process server without it (unit
// tests) gets a verifier over its store and only the configured ingress tokens.

import type { NodeContext } from '../node/context.ts';
import { IngressTokens } from './ingress-token.ts';
import { TokenVerifier } from './verifier.ts';

export interface AuthState {
  verifier: TokenVerifier;
  /** null: no ingress token is admitted, so the ingress routes answer nobody. */
  ingress: IngressTokens | null;
}

export function createVerifier(ctx: Pick<NodeContext, 'store' | 'log'>): TokenVerifier {
  return new TokenVerifier({
    store: ctx.store,
    onReject: (reason) => ctx.log.debug({ reason }, 'token rejected'),
  });
}

/** The context's auth state, created on first use. */
export function authState(ctx: NodeContext): AuthState {
  if (!ctx.auth) {
    const configured = ctx.settings.ingress.token;
    ctx.auth = {
      verifier: createVerifier(ctx),
      ingress: configured.length > 0 ? new IngressTokens(configured) : null,
    };
  }
  return ctx.auth;
}
