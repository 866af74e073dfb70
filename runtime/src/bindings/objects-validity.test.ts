// The front's question about its Durable Objects' lease (op `objects`, docs/runtime.md "The
// runtime host"; the front's side is runtime/front/objects.go): a host holding an application's
// objects answers each question at its next renewal, with the validity left as of when the
// question arrived, so a front asking again at once hears of every renewal once and its deadline
// never ends after the holder's own. The bucket is the in-memory store double at the Store seam.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { MemoryStore } from '../../../test/helpers/memory-store.ts';
import { HostObjects, type ObjectsLook } from './objects-host.ts';

const TTL_MS = 1_500;
const dirs: string[] = [];
after(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function look(application: string): Promise<ObjectsLook> {
  const dir = await mkdtemp(join(tmpdir(), 'objects-validity-'));
  dirs.push(dir);
  return {
    application,
    node: 'node-a',
    storageDir: join(dir, 'objects'),
    frontStateDir: join(dir, 'front'),
    log: () => {},
    ttlMs: TTL_MS,
  };
}

test('a holding front hears of each renewal once, and its deadline never ends after the holder’s', async (t) => {
  const objects = new HostObjects(new MemoryStore());
  const app = await look('counter');
  await objects.storageDir(app);
  try {
    const first = await objects.validity('counter', 0, 30_000);
    assert.equal(first.result, 'holding');
    let renewal = first.result === 'holding' ? first.renewal : 0;
    const startedMs = performance.now();
    let questions = 0;
    while (performance.now() - startedMs < 4_000) {
      const askedMs = performance.now();
      const answer = await objects.validity('counter', renewal, 30_000);
      questions++;
      assert.equal(answer.result, 'holding');
      if (answer.result !== 'holding') return;
      assert.equal(answer.renewal, renewal + 1, 'answered at the next renewal, not before');
      // The holder's own end, asked at once: the front's deadline is not later. The host counts
      // the check from the moment the call reached it, somewhere between `now` and `checkedMs`
      // (a loaded machine can stop this test between the two), so the holder's end is known to
      // within that span: the deadline may not pass its latest bound.
      const now = performance.now();
      const check = await objects.validity('counter', -1, 0);
      const checkedMs = performance.now();
      assert.equal(check.result, 'holding');
      const holderEndMs = checkedMs + (check.result === 'holding' ? check.validMs : 0);
      assert.ok(askedMs + answer.validMs <= holderEndMs + 1, 'the deadline ends after the holder’s');
      assert.ok(answer.validMs > 0 && answer.validMs <= TTL_MS + (now - askedMs));
      renewal = answer.renewal;
    }
    const seconds = (performance.now() - startedMs) / 1000;
    // One question and one answer per renewal: with the 10 s lease (renewed every 3.3 s), 0.6
    // messages a second per front.
    t.diagnostic(
      `${questions} answers for ${questions} renewals in ${seconds.toFixed(1)} s (lease ${TTL_MS} ms): ` +
        `${((2 * questions) / seconds).toFixed(2)} messages/s, 2 per renewal`,
    );
    assert.ok(questions >= 2, `only ${questions} renewals in ${seconds} s`);
    assert.ok(questions <= Math.ceil((seconds * 1000) / (TTL_MS / 3)) + 1, 'more answers than renewals');
  } finally {
    await objects.release('counter');
  }
});

test('a held question is answered standby when the objects are given up, and at once when its connection ends', async () => {
  const objects = new HostObjects(new MemoryStore());
  const app = await look('counter');
  await objects.storageDir(app);
  const first = await objects.validity('counter', 0, 30_000);
  assert.equal(first.result, 'holding');
  const renewal = first.result === 'holding' ? first.renewal : 0;

  const ended = new AbortController();
  const cut = objects.validity('counter', renewal, 30_000, ended.signal);
  ended.abort();
  assert.equal((await cut).result, 'holding', 'a question whose connection ended is answered as things are');

  let answered = false;
  const held = objects.validity('counter', renewal + 1_000, 30_000).then((a) => {
    answered = true;
    return a;
  });
  const pending = objects.validity('counter', renewal, 30_000);
  await held; // another renewal number than the holder's: at once
  assert.ok(answered);
  await objects.release('counter');
  assert.deepEqual(await pending, { result: 'standby' });
  assert.deepEqual(await objects.validity('counter', 0, 30_000), { result: 'standby' });
  assert.deepEqual(await objects.validity('other', 0, 30_000), { result: 'standby' }, 'no holder: standby');
});

test('a node that another node’s lease keeps out answers standby, without waiting', async () => {
  const store = new MemoryStore();
  const a = new HostObjects(store);
  await a.storageDir(await look('counter'));
  const b = new HostObjects(store);
  const lookB = { ...(await look('counter')), node: 'node-b' };
  await assert.rejects(b.storageDir(lookB), /node node-a holds the Durable Objects of counter/);
  const asked = performance.now();
  assert.deepEqual(await b.validity('counter', 0, 30_000), { result: 'standby' });
  assert.ok(performance.now() - asked < 1_000, 'a known standby is answered at once');
  await a.release('counter');
  await b.release('counter');
});
