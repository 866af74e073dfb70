// Storage protocol v1 subtrees on MinIO (docs/ingress.md: listing and deletion cover a key's subtree on
// every backend). MinIO keeps an object and the keys below its name, but lists only the object:
// the node keeps each value one level below its key (docs/adapter.md "Storage layout") so no
// stored object is ever a prefix of another. A real `svc sail` on a real MinIO bucket.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { IngressClient } from './helpers/ingress-client.ts';
import { useMinio } from './helpers/minio.ts';
import { type SailProcess, startSail } from './helpers/svc.ts';

const TOKEN = 'ingress-minio-0123456789';
const minioStarting = useMinio();
let node: SailProcess;
let client: IngressClient;
const bytes = (text: string) => new TextEncoder().encode(text);

before(async () => {
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  node = await startSail([
    ...['--endpoint', options.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
    ...['--ingress-token', TOKEN],
  ]);
  client = new IngressClient(node.url, TOKEN);
});

after(async () => {
  await node?.stop();
});

test('a key that holds a value and has keys beneath lists its subtree, recursive or not', async () => {
  await client.put('t/a', bytes('top'));
  await client.put('t/a/b', bytes('below'));
  await client.put('t/a/c/d', bytes('deeper'));
  assert.deepEqual(await client.list('t/a', true), ['t/a/b', 't/a/c/d']);
  assert.deepEqual(await client.list('t/a', false), ['t/a/b', 't/a/c']);
  assert.deepEqual(await client.list('t', true), ['t/a', 't/a/b', 't/a/c/d']);
  assert.deepEqual(await client.list('t', false), ['t/a']);
  assert.equal(new TextDecoder().decode((await client.get('t/a'))!), 'top');
  assert.equal((await client.stat('t/a'))?.isTerminal, true);
});

test('DELETE of a value with keys beneath, or of an ancestor, removes the whole subtree', async () => {
  await client.put('u/a', bytes('top'));
  await client.put('u/a/b', bytes('below'));
  assert.equal(await client.delete('u/a'), true);
  assert.equal(await client.get('u/a/b'), null);
  assert.equal(await client.stat('u/a'), null);
  await client.put('v/a', bytes('top'));
  await client.put('v/a/b', bytes('below'));
  assert.equal(await client.delete('v'), true);
  assert.equal(await client.get('v/a'), null);
  assert.equal(await client.get('v/a/b'), null);
  assert.equal(await client.stat('v'), null);
});
