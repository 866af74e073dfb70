// docs/cli.md "svc fleet" (freeze and unfreeze) against a real node: freezing twice says so, unfreeze
// says whether deploys were frozen, the reason rules checked before calling, No node to ask.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { readFreeze } from '../src/registry/freeze.ts';
import { type Bucket, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { type RunResult, runSvc, type SailProcess, tempDir } from './helpers/svc.ts';

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
let operator: Signer;
let env: NodeJS.ProcessEnv;

const svc = (args: string[]) => runSvc(args, { env });
const viaNode = (signer: Signer = admin) => ['--node', node.url, '--key', keyArg(signer)];

function fails(result: RunResult, line: RegExp): void {
  assert.equal(result.code, 1, result.stdout);
  assert.match(result.stderr, line);
}

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  operator = await bucket.operator('op-shop', 'operator', ['shop']);
  node = await bucket.sail();
  const dir = tempDir('svc-freeze-cli-');
  env = { SVC_HOME: join(dir, 'home'), SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined };
});
after(async () => {
  await bucket?.close();
});

test('freeze, freeze again (the first stands, and the command says so), unfreeze twice', async () => {
  const first = await svc(['fleet', 'freeze', '--reason', ' release week ', ...viaNode()]);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /^Deploys frozen fleet-wide since \S+ by op-admin: release week\n$/);
  const standing = await readFreeze(bucket.store);
  assert.equal(standing?.reason, 'release week');

  const second = await svc(['fleet', 'freeze', '--reason', 'other', ...viaNode()]);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(
    second.stdout,
    `Deploys were already frozen since ${standing?.frozenAt} by op-admin: release week; that freeze stands unchanged\n`,
  );

  const lifted = await svc(['fleet', 'unfreeze', ...viaNode()]);
  assert.equal(lifted.code, 0, lifted.stderr);
  assert.equal(lifted.stdout, 'Deploys were frozen; the freeze is lifted and nodes accept deploys again\n');
  const again = await svc(['fleet', 'unfreeze', ...viaNode()]);
  assert.equal(again.stdout, 'Deploys were not frozen; nothing changed\n');
  assert.equal(await readFreeze(bucket.store), null);
});

test('a freeze without a reason', async () => {
  const frozen = await svc(['fleet', 'freeze', ...viaNode()]);
  assert.match(frozen.stdout, /^Deploys frozen fleet-wide since \S+ by op-admin\n$/);
  await svc(['fleet', 'unfreeze', ...viaNode()]);
});

test('the reason is checked before anything is called', async () => {
  // No node named: only the client-side check can answer.
  for (const reason of ['x'.repeat(201), 'two\nlines', 'bell\u0007']) {
    fails(
      await svc(['fleet', 'freeze', '--reason', reason]),
      /^svc: Invalid freeze reason: .* \[urn:svc:invalid-input\]\n$/,
    );
  }
});

test('No node to ask; a non-admin key is refused by the node', async () => {
  fails(await svc(['fleet', 'freeze']), /^svc: No node to ask: .*\[urn:svc:invalid-input\]\n$/);
  fails(await svc(['fleet', 'unfreeze']), /^svc: No node to ask: .*\[urn:svc:invalid-input\]\n$/);
  fails(
    await svc(['fleet', 'freeze', ...viaNode(operator)]),
    /^svc: Admin key required: .*\[urn:svc:auth-scope\]\n$/,
  );
  fails(
    await svc(['fleet', 'unfreeze', ...viaNode(operator)]),
    /^svc: Admin key required: .*\[urn:svc:auth-scope\]\n$/,
  );
});
