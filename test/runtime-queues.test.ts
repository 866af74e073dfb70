// Queues in real workerd (docs/bindings.md "Queues"): examples/queues published with the real
// `cell publish` and served by `cell serve`, whose private runtime host stores what the worker
// sends and delivers it to the worker's `queue` handler: each message once when acked, a failing
// one `max_retries` + 1 times and then to the dead-letter queue, a delayed one not before its time.
// Then two replicas on MinIO, one killed with SIGKILL (its whole process tree, as a machine that
// dies) while messages are sent: every message whose send was acknowledged is delivered.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type CellProcess,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  publish,
  s3BucketEnv,
  startServing,
} from './helpers/cell.ts';
import { type Minio, useMinio } from './helpers/minio.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const minioStarting = useMinio();

const running: CellProcess[] = [];
after(async () => {
  await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
});

type Seen = Record<string, { id: string; sent: number; delivered: number; timestamp: number }>;

async function json<T>(url: string): Promise<T> {
  const answer = await fetchText(url);
  assert.ok(answer, `${url} answered`);
  assert.equal(answer.status, 200, answer.body);
  return JSON.parse(answer.body) as T;
}

describe('Queues in real workerd', () => {
  it('delivers each message to the queue handler, retries a failing one into the dead-letter queue, and holds a delayed one until its time', async () => {
    const bucket = dirBucketEnv(tempDir('queues-dir-'));
    const published = await publish(join(EXAMPLES, 'queues'), 'queues-dir', bucket);
    assert.equal(published.code, 0, published.stderr);
    const cell = await startServing('queues-dir', 'node-a', bucket);
    running.push(cell);
    await json(`${cell.url}/send?key=plain`);
    await json(`${cell.url}/send?key=failing&fail`);
    await json(`${cell.url}/send?key=delayed&delay=3`);
    await json(`${cell.url}/send-batch?keys=b1,b2,b3`);
    let seen: Seen = {};
    await waitFor(
      async () => {
        seen = await json<Seen>(`${cell.url}/seen`);
        return seen['jobs/delayed/1'] !== undefined && seen['jobs-dead/failing/1'] !== undefined;
      },
      'the deliveries',
      60_000,
    );
    assert.deepEqual(Object.keys(seen).sort(), [
      'jobs-dead/failing/1',
      'jobs/b1/1',
      'jobs/b2/1',
      'jobs/b3/1',
      'jobs/delayed/1',
      'jobs/failing/1',
      'jobs/failing/2',
      'jobs/plain/1',
    ]);
    const delayed = seen['jobs/delayed/1']!;
    assert.ok(
      delayed.delivered - delayed.sent >= 3000,
      `delivered ${delayed.delivered - delayed.sent} ms after it was sent`,
    );
    assert.equal(
      seen['jobs-dead/failing/1']!.id,
      seen['jobs/failing/1']!.id,
      'the dead-letter queue gets the message itself',
    );
    assert.equal(seen['jobs/failing/2']!.id, seen['jobs/failing/1']!.id);
  });

  describe('on MinIO, with two replicas', () => {
    let minio: Minio;
    before(async () => {
      minio = await minioStarting;
    });

    it('delivers every acknowledged message although a consuming replica is killed with SIGKILL while they are sent', async () => {
      const name = await minio.createBucket();
      const bucket = s3BucketEnv(minio.bucketOptions(name));
      assert.equal((await publish(join(EXAMPLES, 'queues'), 'queues-kill', bucket)).code, 0);
      const [a, b] = await Promise.all([
        startServing('queues-kill', 'node-a', bucket, { deadlineMs: 120_000 }),
        startServing('queues-kill', 'node-b', bucket, { deadlineMs: 120_000 }),
      ]);
      running.push(a, b);
      const acknowledged: string[] = [];
      const send = async (cell: CellProcess, key: string) => {
        const answer = await fetchText(`${cell.url}/send?key=${key}`, {
          signal: AbortSignal.timeout(10_000),
        });
        if (answer?.status === 200) acknowledged.push(key);
      };
      for (let i = 0; i < 20; i++) await send(i % 2 === 0 ? a : b, `before-${i}`);
      // Kill node A as a machine dies: its front, workerd and private runtime host at once.
      const tree = processTree(a.child.pid!);
      for (const pid of tree) process.kill(pid, 'SIGKILL');
      for (let i = 0; i < 20; i++) await send(i % 2 === 0 ? a : b, `during-${i}`);
      for (let i = 0; i < 20; i++) await send(b, `after-${i}`);
      assert.ok(acknowledged.length >= 50, `${acknowledged.length} sends acknowledged`);
      let seen: Seen = {};
      const delivered = () => new Set(Object.keys(seen).map((k) => k.split('/')[1]));
      await waitFor(
        async () => {
          seen = await json<Seen>(`${b.url}/seen`);
          return acknowledged.every((key) => delivered().has(key));
        },
        'every acknowledged message delivered',
        120_000,
      );
      assert.deepEqual(
        acknowledged.filter((key) => !delivered().has(key)),
        [],
      );
    });
  });
});

/** `pid` and every process below it. */
function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    let out = '';
    try {
      out = execFileSync('ps', ['-o', 'pid=', '--ppid', String(tree[i])], { encoding: 'utf8' });
    } catch {
      continue; // ps exits 1 when there is no child
    }
    tree.push(
      ...out
        .split('\n')
        .map(Number)
        .filter((n) => n > 0),
    );
  }
  return tree;
}
