// The coordinator gate of DELETE /v1/applications/:name (docs/api.md): the three cases, the two
// `draining` titles and `capability-missing`, on an in-process node with a scripted lease — the
// lease is the seam: these are the states a live fleet reaches only by racing. The two-node
// forwarding over real processes is in test/applications-delete.test.ts.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { type Signer, startTestNode, type TestNode } from '../../../test/helpers/in-process-node.ts';
import { ensureApplicationForDeploy, retireApplication } from '../../registry/applications.ts';
import { keys } from '../../registry/keys.ts';
import { putJson } from '../../store/store.ts';
import type { LeaseGate } from '../context.ts';
import { type DeletionDeps, deleteApplicationRoute } from './delete-application.ts';

/** A lease whose state each test sets; `tryAcquire` applies `onOffer`. */
class ScriptedLease implements LeaseGate {
  holder: string | null = null;
  self = 'node-self';
  offers = 0;
  onOffer: () => void = () => {};
  view() {
    return this.holder ? { node: this.holder } : null;
  }
  isCoordinator() {
    return this.holder === this.self;
  }
  async tryAcquire() {
    this.offers++;
    this.onOffer();
  }
}

type TestAnswer = Awaited<ReturnType<TestNode['call']>>;

const lease = new ScriptedLease();
const deps: DeletionDeps = { lease, mintNodeToken: undefined };
let node: TestNode;
let admin: Signer;
let self: Signer;

before(async () => {
  node = await startTestNode([
    async (app, ctx) => {
      // Only the delete route, with the scripted lease.
      await deleteApplicationRoute(app, ctx, deps);
    },
  ]);
  admin = await node.operator('op-admin', 'admin', ['*']);
  self = await node.node('node-self');
  deps.mintNodeToken = async () => (await self.bearer()).slice('Bearer '.length);
});
after(async () => {
  await node?.close();
});
beforeEach(async () => {
  lease.holder = null;
  lease.offers = 0;
  lease.onOffer = () => {};
  await ensureApplicationForDeploy(node.store, 'shop', {}, 'test');
});

function expectProblem(answer: TestAnswer, status: number, code: string, title: string) {
  assert.equal(answer.status, status, JSON.stringify(answer.body));
  assert.equal(answer.body.type, `urn:svc:${code}`);
  assert.equal(answer.body.title, title);
}

describe('the coordinator gate', () => {
  test('1. this node holds the lease: it deletes', async () => {
    lease.holder = 'node-self';
    const answer = await node.call('DELETE', '/v1/applications/shop?force=1', { signer: admin });
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, { deleted: [keys.application('shop')] });
    assert.equal(lease.offers, 0);
  });

  test('2. nobody holds it: offers itself once, then deletes when it won', async () => {
    lease.onOffer = () => {
      lease.holder = 'node-self';
    };
    const answer = await node.call('DELETE', '/v1/applications/shop?force=true', { signer: admin });
    assert.equal(answer.status, 200);
    assert.equal(lease.offers, 1);
  });

  test('2. nobody holds it and this node could not take it: draining, No node is coordinating', async () => {
    const answer = await node.call('DELETE', '/v1/applications/shop?force=1', { signer: admin });
    expectProblem(answer, 503, 'draining', 'No node is coordinating');
    assert.equal(lease.offers, 1, 'offered once, not more');
  });

  test('3. forwarded once; a forwarded request reaching a non-coordinator is draining, Not the coordinator', async () => {
    // The holder's registered address is this very node, which (still not the coordinator)
    // refuses the forwarded request; the first hop answers that verbatim.
    lease.holder = 'node-other';
    await putJson(node.store, keys.nodeRecord('node-other'), {
      v: 1,
      id: 'node-other',
      advertise: new URL(node.url).host,
    });
    const answer = await node.call('DELETE', '/v1/applications/shop?force=1', { signer: admin });
    expectProblem(answer, 503, 'draining', 'Not the coordinator');
    assert.match(answer.body.detail, /forwarded here, but the lease is held by node-other/);
  });

  test('2 then 3: another node won the offer, so the request goes there', async () => {
    lease.onOffer = () => {
      lease.holder = 'node-winner';
    };
    await putJson(node.store, keys.nodeRecord('node-winner'), {
      v: 1,
      id: 'node-winner',
      advertise: new URL(node.url).host,
    });
    const answer = await node.call('DELETE', '/v1/applications/shop?force=1', { signer: admin });
    expectProblem(answer, 503, 'draining', 'Not the coordinator');
    assert.equal(lease.offers, 1);
  });

  test('the forwarded-once mark counts only on a node token', async () => {
    lease.holder = 'node-self';
    const answer = await node.call('DELETE', '/v1/applications/shop?force=1', {
      signer: admin,
      headers: { 'x-svc-forwarded': '1' },
    });
    assert.equal(answer.status, 200, 'an operator claiming to be forwarded is simply served');
  });

  test('capability-missing: no signing key, no address, coordinator not answering', async () => {
    lease.holder = 'node-far';
    const mint = deps.mintNodeToken;
    deps.mintNodeToken = async () => {
      throw new Error('no key');
    };
    expectProblem(
      await node.call('DELETE', '/v1/applications/shop?force=1', { signer: admin }),
      409,
      'capability-missing',
      'Cannot reach the coordinator',
    );
    deps.mintNodeToken = mint;
    expectProblem(
      await node.call('DELETE', '/v1/applications/shop?force=1', { signer: admin }),
      409,
      'capability-missing',
      'Cannot reach the coordinator',
    );
    await putJson(node.store, keys.nodeRecord('node-far'), {
      v: 1,
      id: 'node-far',
      advertise: '127.0.0.1:1',
    });
    const gone = await node.call('DELETE', '/v1/applications/shop?force=1', { signer: admin });
    expectProblem(gone, 409, 'capability-missing', 'Cannot reach the coordinator');
    assert.match(gone.body.detail, /did not answer/);
  });
});

describe('what the coordinator deletes', () => {
  test('not retired, within grace, forced only by 1 or true, missing', async () => {
    lease.holder = 'node-self';
    for (const query of ['', '?force=0', '?force=yes', '?force=TRUE']) {
      expectProblem(
        await node.call('DELETE', `/v1/applications/shop${query}`, { signer: admin }),
        400,
        'invalid-input',
        'Application is not retired',
      );
    }
    await retireApplication(node.store, 'shop', 'op-admin', 60_000);
    expectProblem(
      await node.call('DELETE', '/v1/applications/shop', { signer: admin }),
      400,
      'invalid-input',
      'Retirement grace period is not over',
    );
    expectProblem(
      await node.call('DELETE', '/v1/applications/ghost?force=1', { signer: admin }),
      404,
      'not-found',
      'No such application',
    );
  });

  test('retired past its grace: deleted without force', async () => {
    lease.holder = 'node-self';
    await ensureApplicationForDeploy(node.store, 'old', {}, 'test');
    await retireApplication(node.store, 'old', 'op-admin', 0, () => new Date(Date.now() - 1000));
    const answer = await node.call('DELETE', '/v1/applications/old', { signer: admin });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
  });

  test('scope and name are checked before the gate', async () => {
    const narrow = await node.operator('op-narrow', 'operator', ['blog']);
    expectProblem(
      await node.call('DELETE', '/v1/applications/shop?force=1', { signer: narrow }),
      403,
      'auth-scope',
      'Out of scope',
    );
    expectProblem(
      await node.call('DELETE', '/v1/applications/Shop?force=1', { signer: admin }),
      400,
      'invalid-slug',
      'Invalid application name',
    );
    assert.equal(lease.offers, 0);
  });
});
