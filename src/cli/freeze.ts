// docs/cli.md "svc fleet" (freeze and unfreeze): admin only, node only (no bucket path); without a
// node the refusal is `invalid-input`, title No node to ask.

import { checkFreezeReason } from '../registry/freeze.ts';
import type { FreezeRecord } from '../registry/records.ts';
import { callNode, type RemoteFlags, resolveTarget } from './client.ts';
import { say } from './output.ts';

export async function fleetFreeze(flags: RemoteFlags & { reason?: string }): Promise<void> {
  // The node checks the reason too; checking first saves a round trip and names the rule the same way.
  const reason = checkFreezeReason(flags.reason);
  const target = await resolveTarget(flags);
  const answer = (await callNode(
    target,
    'POST',
    '/v1/fleet/freeze',
    reason === undefined ? {} : { body: { reason } },
  )) as {
    freeze: FreezeRecord;
    created: boolean;
  };
  const { freeze } = answer;
  const why = freeze.reason ? `: ${freeze.reason}` : '';
  say(
    answer.created
      ? `Deploys frozen fleet-wide since ${freeze.frozenAt} by ${freeze.by}${why}`
      : `Deploys were already frozen since ${freeze.frozenAt} by ${freeze.by}${why}; that freeze stands unchanged`,
  );
}

export async function fleetUnfreeze(flags: RemoteFlags): Promise<void> {
  const target = await resolveTarget(flags);
  const { lifted } = (await callNode(target, 'DELETE', '/v1/fleet/freeze', {})) as { lifted: boolean };
  say(
    lifted
      ? 'Deploys were frozen; the freeze is lifted and nodes accept deploys again'
      : 'Deploys were not frozen; nothing changed',
  );
}
