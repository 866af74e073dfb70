// The Cache API (docs/runtime.md "Cache API") on a real node running the real runtime: svc gives
// workers an always-empty cache, so `caches.default` and `caches.open()` answer instead of throwing
// workerd's "No Cache was configured" (which SvelteKit's Cloudflare adapter hits on every
// request): `match` finds nothing, `put` takes the response and keeps nothing, `delete` finds
// nothing.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { projectDir } from './helpers/artifacts.ts';
import { type DeployNode, SERVE_DEADLINE_MS, startDeployNode } from './helpers/deploy-node.ts';
import { waitFor } from './helpers/svc.ts';

const WORKER = `
export default {
  async fetch() {
    const key = new Request('https://cached.example/page');
    const before = await caches.default.match(key);
    await caches.default.put(key, new Response('kept?'.repeat(20000), { headers: { 'cache-control': 'max-age=600' } }));
    const after = await caches.default.match(key);
    const named = await caches.open('mine');
    await named.put(key, new Response('named'));
    const fromNamed = await named.match(key);
    const deleted = await caches.default.delete(key);
    return Response.json({ before: before ?? null, after: after ?? null, fromNamed: fromNamed ?? null, deleted });
  },
};
`;

describe('the Cache API answers as an empty cache', () => {
  let target: DeployNode;
  let port: number;

  before(async () => {
    target = await startDeployNode();
    const dir = projectDir({
      'wrangler.jsonc': JSON.stringify({
        name: 'cache-user',
        main: 'src/index.js',
        compatibility_date: '2025-10-08',
      }),
      'src/index.js': WORKER,
    });
    const { code, stderr } = await target.deploy(dir);
    assert.equal(code, 0, stderr);
    port = await target.portOf('cache-user');
  });
  after(async () => {
    await target?.stop();
  });

  test('match, put, caches.open and delete run, and nothing is kept', async () => {
    const body = (await waitFor(
      async () => {
        const answer = await fetch(`http://127.0.0.1:${port}/`).catch(() => null);
        return answer ? { status: answer.status, text: await answer.text() } : null;
      },
      () => `cache-user to answer\n${target.node.log().slice(-3000)}`,
      SERVE_DEADLINE_MS,
    )) as { status: number; text: string };
    assert.equal(body.status, 200, body.text);
    assert.deepEqual(JSON.parse(body.text), { before: null, after: null, fromNamed: null, deleted: false });
  });
});
