// Workers KV and R2 when the bucket stops answering (docs/bindings.md "KV namespaces" and "R2
// buckets", their paragraphs on a failing bucket): a `cell serve` on MinIO frozen with SIGSTOP
// (connections open, nothing answers). A binding call that needs the bucket fails within the
// store's operation deadline (10 s) with an error the worker catches, never hangs; a KV key in
// the node's read cache is still answered; a put cut off by the outage is afterwards seen whole
// or not at all.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type CellProcess, fetchText, publish, s3BucketEnv, startServing } from './helpers/cell.ts';
import { type Minio, useMinio } from './helpers/minio.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const minioStarting = useMinio();

/** Every call caught: the worker answers what the binding gave or threw. */
const WORKER = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get('key');
    try {
      if (url.pathname === '/r2put') {
        await env.FILES.put(key, url.searchParams.get('value'));
        return Response.json({ ok: true });
      }
      if (url.pathname === '/r2get') {
        const object = await env.FILES.get(key);
        return Response.json({ value: object === null ? null : await object.text() });
      }
      if (url.pathname === '/put') {
        await env.DATA.put(key, url.searchParams.get('value'));
        return Response.json({ ok: true });
      }
      return Response.json({ value: await env.DATA.get(key) });
    } catch (err) {
      return Response.json({ error: String(err) });
    }
  },
};
`;

describe('Workers KV and R2 when the bucket stops answering', () => {
  let minio: Minio;
  let cell: CellProcess;
  before(async () => {
    minio = await minioStarting;
    const bucket = await minio.createBucket();
    const env = s3BucketEnv(minio.bucketOptions(bucket));
    const project = tempDir('kv-faults-');
    writeFileSync(
      join(project, 'cell.json'),
      JSON.stringify({
        main: 'worker.js',
        compatibility_date: '2025-06-01',
        kv_namespaces: [{ binding: 'DATA', id: 'data' }],
        r2_buckets: [{ binding: 'FILES', bucket_name: 'files' }],
      }),
    );
    writeFileSync(join(project, 'worker.js'), WORKER);
    const published = await publish(project, 'kv-faults', env);
    assert.equal(published.code, 0, published.stderr);
    cell = await startServing('kv-faults', 'node-faults', env);
  });
  after(async () => {
    minio?.thaw();
    await cell?.stop('SIGTERM');
  });

  const ask = async (path: string) => JSON.parse((await fetchText(`${cell.url}${path}`))!.body);

  it('fails the calls that need the bucket with an error the worker catches, and keeps cached reads', async () => {
    assert.deepEqual(await ask('/put?key=hot&value=cached'), { ok: true });
    assert.deepEqual(await ask('/get?key=hot'), { value: 'cached' });
    minio.freeze();
    try {
      assert.deepEqual(await ask('/get?key=hot'), { value: 'cached' }, 'the read cache answers');
      assert.deepEqual(await ask('/get?key=never-read'), {
        error: 'Error: KV GET failed: 503 the bucket did not answer the KV request',
      });
      assert.deepEqual(await ask(`/put?key=cut-off&value=${'w'.repeat(1000)}`), {
        error: 'Error: KV PUT failed: 503 the bucket did not answer the KV request',
      });
    } finally {
      minio.thaw();
    }
    const after = await waitFor(async () => {
      const answer = await ask('/get?key=cut-off');
      return 'value' in answer ? answer : undefined;
    }, 'the bucket to answer again');
    assert.ok(
      after.value === null || after.value === 'w'.repeat(1000),
      `the cut-off put is whole or absent: ${String(after.value).slice(0, 40)}`,
    );
    assert.deepEqual(await ask('/put?key=again&value=fine'), { ok: true });
    assert.deepEqual(await ask('/get?key=again'), { value: 'fine' });
  });

  it('fails R2 calls the same way, and a put cut off by the outage is whole or absent', async () => {
    assert.deepEqual(await ask('/r2put?key=before&value=kept'), { ok: true });
    const internal = (operation: string) => ({
      error: `Error: ${operation}: We encountered an internal error. Please try again. (10001)`,
    });
    minio.freeze();
    try {
      assert.deepEqual(await ask('/r2get?key=before'), internal('get'));
      assert.deepEqual(await ask(`/r2put?key=cut-off&value=${'r'.repeat(1000)}`), internal('put'));
    } finally {
      minio.thaw();
    }
    const after = await waitFor(async () => {
      const answer = await ask('/r2get?key=cut-off');
      return 'value' in answer ? answer : undefined;
    }, 'the bucket to answer R2 again');
    assert.ok(
      after.value === null || after.value === 'r'.repeat(1000),
      `the cut-off put is whole or absent: ${String(after.value).slice(0, 40)}`,
    );
    assert.deepEqual(await ask('/r2get?key=before'), { value: 'kept' });
  });
});
