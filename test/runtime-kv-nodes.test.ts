// Workers KV across two nodes (docs/bindings.md "KV namespaces", its consistency paragraph): examples/kv served
// by two `cell serve` processes on one local-directory bucket, each with its own runtime host and
// so its own read cache, as two nodes have. A write is read back at once where it was made, and
// on the other node once that node's cached copy is older than the read's cacheTtl (30 s here,
// the least Cloudflare accepts; developers.cloudflare.com/kv/api/read-key-value-pairs/).

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  type CellProcess,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  publish,
  startServing,
} from './helpers/cell.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const CACHE_TTL_S = 30;

describe('Workers KV on two nodes', () => {
  const running: CellProcess[] = [];
  after(async () => {
    await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
  });

  it('a write is read at once on its node, and on the other within the cacheTtl of its reads', async () => {
    const bucket = dirBucketEnv(tempDir('kv-nodes-'));
    const published = await publish(join(EXAMPLES, 'kv'), 'kv-two', bucket);
    assert.equal(published.code, 0, published.stderr);
    const [a, b] = await Promise.all(
      ['node-a', 'node-b'].map(async (nodeId) => {
        const cell = await startServing('kv-two', nodeId, bucket);
        running.push(cell);
        return cell;
      }),
    );
    const read = async (cell: CellProcess) =>
      JSON.parse((await fetchText(`${cell.url}/get?key=shared&cacheTtl=${CACHE_TTL_S}`))!.body).value;

    assert.equal(await read(b), null, 'node b reads the key absent, and caches that');
    const written = Date.now();
    assert.equal((await fetchText(`${a.url}/put?key=shared&value=from-a`))?.status, 200);
    assert.equal(await read(a), 'from-a', 'the writing node reads its write back at once');
    assert.equal(await read(b), null, 'node b answers from its cache: the read cost no bucket request');
    const seen = await waitFor(
      async () => ((await read(b)) === 'from-a' ? Date.now() : undefined),
      () => `node b to see the write\n${b.stderr()}`,
      (CACHE_TTL_S + 15) * 1000,
    );
    assert.ok(
      seen !== undefined && seen - written <= (CACHE_TTL_S + 5) * 1000,
      `seen ${seen! - written} ms after the write`,
    );
  });
});
