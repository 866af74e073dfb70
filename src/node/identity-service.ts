// The daemon's identity at boot (docs/identity.md "Key files"; docs/cli.md "svc sail"
// `--ingress-token`): the node key made or loaded and its public half published, the
// ingress tokens admitted (or one minted) and the first written to the state directory.
// Runs first among the daemon's services so others can sign node tokens. The parts are in
// src/auth/, which knows nothing of the daemon; this file puts them into the context.

import { establishIngressTokens, IngressTokens } from '../auth/ingress-token.ts';
import { ensureNodeKey, publishNodeKey } from '../auth/node-key.ts';
import { type AuthState, createVerifier } from '../auth/state.ts';
import type { DaemonService, NodeContext } from './context.ts';

export function identityService(): DaemonService {
  return {
    name: 'identity',
    async start(ctx) {
      const stateDir = ctx.settings.node.stateDir;
      const nodeKey = await ensureNodeKey(stateDir);
      await publishNodeKey(ctx.store, ctx.nodeId, nodeKey);
      const ingress = await establishIngressTokens(ctx.settings.ingress.token, stateDir);
      ctx.nodeKey = nodeKey;
      ctx.auth = { verifier: ctx.auth?.verifier ?? createVerifier(ctx), ingress };
      ctx.log.info(
        { node: ctx.nodeId, ingressTokens: ingress.minted ? 'minted' : 'configured' },
        'identity ready',
      );
    },
    async stop() {},
  };
}

/**
 * The context's auth state, created on first use: the identity service sets it up at boot; an
 * in-process server without it (unit tests) gets a verifier over its store and only the
 * configured ingress tokens.
 */
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
