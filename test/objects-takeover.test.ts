// Durable Objects moving between two runtimes (docs/bindings.md "Durable Objects on the fleet"):
// the real `cell serve` of examples/durable-objects on two nodes (each with its own state folder
// and runtime host) over one MinIO bucket, the objects' lease shortened to 4 s. One node serves the
// application while the other stands by, not ready; the serving node killed with SIGKILL (front,
// runtime host and workerd), the other takes the objects over with every acknowledged increment;
// the former holder started again stands by.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { openStore } from '../src/store/open.ts';
import {
  type CellProcess,
  copyProject,
  EXAMPLES,
  fetchText,
  processTree,
  publish,
  s3BucketEnv,
  startCell,
} from './helpers/cell.ts';
import { useMinio } from './helpers/minio.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const minio = await useMinio();
const running: CellProcess[] = [];
after(async () => {
  await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
});

const TTL = { CELL_OBJECTS_LEASE_TTL_MS: '4000' };

async function health(cell: CellProcess): Promise<number | null> {
  return (await fetchText(`${cell.url}/.well-known/cell/health`))?.status ?? null;
}

async function increment(cell: CellProcess): Promise<number> {
  const answer = await fetchText(`${cell.url}/shared`, { method: 'POST' });
  assert.equal(answer?.status, 200, answer?.body);
  return JSON.parse(answer?.body ?? '{}').count;
}

test('one runtime serves the objects, the other stands by; kill -9 of the holder: the other serves every acknowledged increment', async () => {
  const options = minio.bucketOptions(await minio.createBucket());
  const bucket = s3BucketEnv(options);
  const store = await openStore({ ...options, stateDir: tempDir('objects-takeover-store-') });
  const project = copyProject(`${EXAMPLES}/durable-objects`);
  assert.equal((await publish(project, 'counter', bucket)).code, 0);
  const stateA = tempDir('objects-node-a-');
  const a = await startCell('counter', 'node-a', bucket, { CELL_STATE_DIR: stateA, ...TTL });
  running.push(a);
  await waitFor(
    async () => (await health(a)) === 200,
    () => `node-a serving\n${a.stderr()}`,
    60_000,
  );
  const b = await startCell('counter', 'node-b', bucket, {
    CELL_STATE_DIR: tempDir('objects-node-b-'),
    ...TTL,
  });
  running.push(b);
  await waitFor(
    () => b.stderr().includes('node node-a holds the Durable Objects of counter'),
    'node-b standing by',
  );
  assert.equal(await health(b), 503, 'a standby is not ready, so routing leaves it out');
  assert.equal(b.children().length, 0, 'a standby runs no workerd');

  let acknowledged = 0;
  for (let i = 0; i < 30; i++) acknowledged = await increment(a);
  // Two ship passes after the last increment: the second began after the first one's PUT.
  const generations = async () => {
    const listed = await store.list(keys.runtimeObjectsNamespacesPrefix('counter'), { recursive: true });
    return listed.objects
      .filter((o) => !o.key.includes('/metadata/') && o.key.endsWith('/snapshot'))
      .map((o) => o.key)
      .sort()
      .at(-1);
  };
  const shipped = await waitFor(generations, 'a first snapshot');
  await waitFor(async () => (await generations()) !== shipped, 'the next pass');
  const next = await generations();
  await waitFor(async () => (await generations()) !== next, 'one more pass');

  for (const pid of processTree(a.child.pid as number)) process.kill(pid, 'SIGKILL');
  await a.stop();
  running.splice(running.indexOf(a), 1);
  await waitFor(
    async () => (await health(b)) === 200,
    () => `node-b taking over\n${b.stderr()}`,
    60_000,
  );
  const read = await fetchText(`${b.url}/shared`);
  assert.equal(JSON.parse(read?.body ?? '{}').count, acknowledged, 'every acknowledged increment');
  assert.equal(await increment(b), acknowledged + 1);

  // node-a again, on its old state folder: it stands by and serves nothing.
  const again = await startCell('counter', 'node-a', bucket, { CELL_STATE_DIR: stateA, ...TTL });
  running.push(again);
  await waitFor(
    () => again.stderr().includes('node node-b holds the Durable Objects of counter'),
    () => `node-a standing by\n${again.stderr()}`,
  );
  assert.equal(await health(again), 503);
  assert.equal(again.children().length, 0);
  assert.equal(await increment(b), acknowledged + 2);
  await store.close();
});
