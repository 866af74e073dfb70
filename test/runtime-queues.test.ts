// Queues in real workerd (docs/bindings.md "Queues"): examples/queues published with the real
// `cell publish` and served by `cell serve`, whose private runtime host stores what the worker
// sends and delivers it to the worker's `queue` handler: each message once when acked, a failing
// one `max_retries` + 1 times and then to the dead-letter queue, a delayed one not before its time.

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
});
