// The daemon's identity at boot (docs/api.md "Authentication"; docs/cli.md "svc sail"
// `--ingress-token`): the node key made or loaded and its public half published, the
// ingress tokens admitted (or one minted) and the first written to the state directory.
// Runs first among the daemon's services so others can sign node tokens.

import type { DaemonService } from '../node/daemon.ts';
import { establishIngressTokens } from './ingress-token.ts';
import { ensureNodeKey, publishNodeKey } from './node-key.ts';
import { createVerifier } from './state.ts';

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
