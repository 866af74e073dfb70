// `svc queues` (docs/cli.md "svc queues") against a real `svc sail` serving a real worker in
// workerd, with an operator key scoped to `shop-*` and no bucket credentials: `queues list` names
// every queue the serving deployment sends to, consumes or dead-letters into, with the backlog the
// worker's sends left (a queue nobody consumes keeps its messages) and the node delivering each;
// `queues consumer list` prints the consumers' settings with Cloudflare's defaults filled in; and
// the refusals, one line each.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertProblem, type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { assertRefused, deployThroughNode, readyPort } from './helpers/binding-data.ts';
import { CELL_BIN } from './helpers/cell.ts';
import { runSvc, type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const APP = 'shop-web';

let bucket: Bucket;
let node: SailProcess;
let shop: Signer;
let other: Signer;
let port: number;
const env = () => ({
  SVC_HOME: tempDir('svc-home-'),
  SVC_OPERATOR_KEY: undefined,
  SVC_REMOTE: undefined,
  SVC_STATE_DIR: tempDir(),
  SVC_S3_ENDPOINT: undefined,
});
const svc = (args: string[]) => runSvc(args, { env: env(), timeoutMs: 60_000 });
const asShop = () => ['--name', 'shop', '--env', 'web', '--node', node.url, '--key', keyArg(shop)];

before(async () => {
  bucket = await openBucket();
  const admin = await bucket.operator('op-admin', 'admin', ['*']);
  shop = await bucket.operator('op-shop', 'operator', ['shop-*']);
  other = await bucket.operator('op-other', 'operator', ['other-*']);
  node = await bucket.sail(['--cell-bin', CELL_BIN, '--cell-env', 'CELL_DRAIN_MS=2000']);
  await deployThroughNode(node, shop, {
    'cell.jsonc': JSON.stringify({
      name: APP,
      main: 'index.js',
      compatibility_date: '2025-06-01',
      queues: {
        producers: [
          { binding: 'JOBS', queue: 'jobs' },
          { binding: 'LATER', queue: 'jobs', delivery_delay: 3600 },
          { binding: 'LOGS', queue: 'logs' },
        ],
        consumers: [{ queue: 'logs', dead_letter_queue: 'logs-dead', max_batch_size: 50 }],
      },
    }),
    'index.js': `export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname !== '/send') return new Response('ok');
    await env.JOBS.send({ n: 1 });
    await env.JOBS.sendBatch([{ body: 'two', contentType: 'text' }, { body: 'three', contentType: 'text' }]);
    await env.LATER.send('in an hour', { contentType: 'text' });
    return new Response('sent');
  },
  async queue() {},
};
`,
  });
  port = await readyPort(node, admin, APP);
  await bucket.application('shop-empty');
});

after(async () => {
  await bucket?.close();
});

describe('svc queues through a node', () => {
  test('queues list: every queue the deployment names, with its backlog, as a table and as JSON', async () => {
    const sent = await fetch(`http://127.0.0.1:${port}/send`, { signal: AbortSignal.timeout(10_000) });
    assert.equal(await sent.text(), 'sent');
    const json = await svc(['queues', 'list', ...asShop(), '--json']);
    assert.equal(json.code, 0, json.stderr);
    const doc = JSON.parse(json.stdout);
    assert.equal(doc.application, APP);
    const jobs = doc.queues.find((q: { queue: string }) => q.queue === 'jobs');
    assert.deepEqual(
      doc.queues.map(
        (q: { queue: string; producers: string[]; consumed: boolean; dead_letter_of: string[] }) => [
          q.queue,
          q.producers,
          q.consumed,
          q.dead_letter_of,
        ],
      ),
      [
        ['jobs', ['JOBS', 'LATER'], false, []],
        ['logs', ['LOGS'], true, []],
        ['logs-dead', [], false, ['logs']],
      ],
    );
    assert.equal(jobs.backlog.messages, 4, 'nobody consumes jobs: all four sent wait');
    assert.ok(jobs.backlog.bytes > 0);
    assert.ok(Math.abs(jobs.backlog.first_due_ms - Date.now()) < 60_000, 'three are due now');
    assert.equal(jobs.delivering, null);
    const listed = await svc(['queues', 'list', ...asShop()]);
    assert.equal(listed.code, 0, listed.stderr);
    const lines = listed.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^QUEUE +PRODUCERS +CONSUMED +BACKLOG +BYTES +NEXT DUE +DELIVERING$/);
    assert.match(lines[1]!, /^jobs +JOBS, LATER +no +4 +\d+ B +(now|\d+ s ago) +-$/);
    assert.match(lines[2]!, /^logs +LOGS +yes +0 +0 B +- +-$/);
    assert.match(lines[3]!, /^logs-dead +- +no \(dead letters of logs\) +0 +0 B +- +-$/);
    const empty = await svc([
      'queues',
      'list',
      '--name',
      'shop-empty',
      '--node',
      node.url,
      '--key',
      keyArg(shop),
    ]);
    assert.equal(empty.stdout, 'shop-empty has no serving deployment, so no queue.\n');
  });

  test("queues consumer list: each consumer's settings, Cloudflare's defaults filled in", async () => {
    const listed = await svc(['queues', 'consumer', 'list', ...asShop()]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(
      listed.stdout,
      [
        'QUEUE  BATCH SIZE  BATCH TIMEOUT  RETRIES  DEAD LETTER QUEUE  RETRY DELAY  MAX CONCURRENCY',
        'logs   50          5 s            3        logs-dead          0 s          -',
        '',
      ].join('\n'),
    );
    const json = JSON.parse((await svc(['queues', 'consumer', 'list', ...asShop(), '--json'])).stdout);
    assert.deepEqual(json.consumers, [
      {
        queue: 'logs',
        max_batch_size: 50,
        max_batch_timeout: 5,
        max_retries: 3,
        dead_letter_queue: 'logs-dead',
        retry_delay: 0,
        max_concurrency: null,
      },
    ]);
  });

  test("the wake route wakes the node's consumer loops of a queue; its refusals", async () => {
    const wake = (queue: string, body: unknown, signer = shop) =>
      call(node.url, 'POST', `/v1/applications/${APP}/queues/${queue}/wake`, { signer, body });
    // The replica serving shop-web consumes logs (one loop) and not jobs.
    let woken: Awaited<ReturnType<typeof wake>> | null = null;
    await waitFor(
      async () => {
        woken = await wake('logs', { visible_ms: Date.now() });
        return woken.body.woken === 1;
      },
      'the consumer loop of logs',
      30_000,
    );
    assert.deepEqual(woken!.body, { application: APP, queue: 'logs', woken: 1 });
    assert.deepEqual((await wake('jobs', {})).body, { application: APP, queue: 'jobs', woken: 0 });
    assertProblem(
      await wake('Bad_Queue', {}),
      400,
      'invalid-input',
      'Invalid queue name',
      /not a queue name/,
    );
    assertProblem(
      await wake('logs', { visible_ms: 'soon' }),
      400,
      'invalid-input',
      'Invalid wake',
      /"visible_ms" must be a time/,
    );
    assertProblem(await wake('logs', {}, other), 403, 'auth-scope', 'Out of scope');
  });

  test('refusals: another scope, an unknown application, no node', async () => {
    assertRefused(
      await svc(['queues', 'list', '--name', 'shop-web', '--node', node.url, '--key', keyArg(other)]),
      /^svc: Out of scope: .* \[urn:svc:auth-scope\]\n$/,
    );
    assertRefused(
      await svc([
        'queues',
        'consumer',
        'list',
        '--name',
        'shop-nope',
        '--node',
        node.url,
        '--key',
        keyArg(shop),
      ]),
      /^svc: No such application: no application is named "shop-nope"; applications are created by their first deploy \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['queues', 'list', '--name', 'shop-web', '--key', keyArg(shop)]),
      /^svc: No node to ask: pass --node <url>, or add a remote with svc remote add \[urn:svc:invalid-input\]\n$/,
    );
  });
});
