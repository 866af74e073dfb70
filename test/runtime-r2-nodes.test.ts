// R2 across two nodes (docs/bindings.md "R2 buckets"), as test/runtime-kv-nodes.test.ts does for KV:
// examples/r2 served by two `cell serve` processes on one MinIO bucket, each with its own runtime
// host, as two nodes have. R2 keeps no per-node copy, so an object put through the binding on one
// node is read, listed and deleted through the binding on the other at once (Cloudflare's R2 is
// strongly consistent: developers.cloudflare.com/r2/reference/consistency/). Another application
// with the same bucket_name, served on the second node, reaches none of those objects.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { type CellProcess, EXAMPLES, fetchText, publish, s3BucketEnv, startServing } from './helpers/cell.ts';
import { useMinio } from './helpers/minio.ts';

const minioStarting = useMinio();

/** examples/r2's object API on one served application. */
function objects(cell: CellProcess) {
  const url = (key: string) => `${cell.url}/objects/${encodeURIComponent(key)}`;
  return {
    put: (key: string, body: string) =>
      fetchText(url(key), { method: 'PUT', body, headers: { 'content-type': 'text/plain' } }),
    get: (key: string) => fetchText(url(key)),
    delete: (key: string) => fetchText(url(key), { method: 'DELETE' }),
    list: async () =>
      JSON.parse((await fetchText(`${cell.url}/objects`))!.body).map((o: { key: string }) => o.key),
  };
}

describe('R2 on two nodes', () => {
  const running: CellProcess[] = [];
  after(async () => {
    await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
  });

  it("an object put on one node is read, listed and deleted on the other at once; another application's bucket of the same name sees none of it", async () => {
    const minio = await minioStarting;
    const bucket = s3BucketEnv(minio.bucketOptions(await minio.createBucket()));
    for (const application of ['r2-two', 'r2-other']) {
      const published = await publish(join(EXAMPLES, 'r2'), application, bucket);
      assert.equal(published.code, 0, published.stderr);
    }
    const serve = async (application: string, nodeId: string) => {
      // Three runtimes start at once: on a loaded 2-core machine that takes longer than one.
      const cell = await startServing(application, nodeId, bucket, { deadlineMs: 120_000 });
      running.push(cell);
      return cell;
    };
    const [onA, onB, otherOnB] = (
      await Promise.all([serve('r2-two', 'node-a'), serve('r2-two', 'node-b'), serve('r2-other', 'node-b')])
    ).map(objects);

    assert.equal((await onB!.get('shared'))?.status, 404, 'node b reads the object absent first');
    assert.equal((await onA!.put('shared', 'from-a'))?.status, 200);
    assert.deepEqual(
      await onB!.get('shared'),
      { status: 200, body: 'from-a' },
      'node b reads the write at once',
    );
    assert.deepEqual(await onB!.list(), ['shared']);
    assert.equal((await onB!.put('shared', 'from-b'))?.status, 200);
    assert.deepEqual(await onA!.get('shared'), { status: 200, body: 'from-b' }, 'the last put wins on both');

    // The other application binds a bucket named `files` too, on node b: it is its own.
    assert.equal((await otherOnB!.get('shared'))?.status, 404);
    assert.deepEqual(await otherOnB!.list(), []);
    assert.equal((await otherOnB!.put('shared', 'other'))?.status, 200);
    assert.equal((await otherOnB!.delete('shared'))?.status, 204);
    assert.deepEqual(
      await onA!.get('shared'),
      { status: 200, body: 'from-b' },
      "the other application's delete",
    );

    assert.equal((await onB!.delete('shared'))?.status, 204);
    assert.equal((await onA!.get('shared'))?.status, 404, 'node a sees the delete at once');
    assert.deepEqual(await onA!.list(), []);
  });
});
