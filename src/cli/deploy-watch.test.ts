// Polling a deploy through failed polls (docs/deploys.md "svc deploy", step 8), against a
// loopback stand-in for the node's `GET /v1/deploys/:id` (the node API is the seam): a poll that
// no node answers, or that a node answers 5xx, is no outcome and polling goes on; past the outage
// bound the command fails with the last code, title Deploy outcome unknown; any other refusal is
// final at once. The pace of polls (docs/api.md "Waiting for a change"): each names the state
// last seen and asks the node to wait; after an answer its node held and a change ended, the
// next poll goes at once; after any other, no sooner than a second after the last one started,
// so a node that ignores the wait is polled once a second. The processes watch is paced the same.

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { tempDir } from '../../test/helpers/svc.ts';
import { generateOperatorKey } from '../auth/key-file.ts';
import { WAIT_HEADER } from '../node/deploys/long-poll.ts';
import type { Accepted } from './deploy-upload.ts';
import {
  DEPLOY_WAIT_S,
  POLL_INTERVAL_MS,
  SERVING_WAIT_S,
  watchDeploy,
  watchServing,
} from './deploy-watch.ts';

const key = generateOperatorKey('op-watch');
const id = 'shop.0123456789abcdef';

function accepted(endpoint: string): Accepted {
  return {
    status: { id, application: 'shop', state: 'accepted' },
    location: `/v1/deploys/${id}`,
    endpoint,
  };
}

/** A poll as the stand-in saw it: its query and when it arrived. */
interface Seen {
  query: URLSearchParams;
  atMs: number;
}

/**
 * A node stand-in answering the n-th poll with `answers[n]` (the last one from then on); an
 * answer with `wait` says so in the header a node that honours `wait` sets.
 */
async function node(
  answers: { status: number; body: unknown; wait?: 'changed' | 'unchanged' }[],
): Promise<{ url: string; server: Server; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    seen.push({ query: new URL(request.url ?? '/', 'http://node').searchParams, atMs: performance.now() });
    const answer = answers[Math.min(seen.length - 1, answers.length - 1)]!;
    const type = answer.status >= 400 ? 'application/problem+json' : 'application/json';
    const headers: Record<string, string> = { 'content-type': type };
    if (answer.wait) headers[WAIT_HEADER] = answer.wait;
    response.writeHead(answer.status, headers).end(JSON.stringify(answer.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, seen };
}

const ok = (state: string, more: Record<string, unknown> = {}) => ({
  status: 200,
  body: { id, application: 'shop', state, ...more },
});
/** As a node that held the answer says of it. */
const held = (answer: { status: number; body: unknown }, wait: 'changed' | 'unchanged') => ({
  ...answer,
  wait,
});

/** The time between each poll and the one before it. */
function gaps(seen: Seen[]): number[] {
  return seen.slice(1).map((poll, i) => poll.atMs - seen[i]!.atMs);
}

/**
 * The stand-in sees when polls arrive, which trails when the command started them by the token's
 * signing and the connection (the first of a run takes longest): gaps between arrivals may read
 * that much under the gaps between starts.
 */
const ARRIVAL_SLACK_MS = 100;

const storeDown = {
  status: 503,
  body: { type: 'urn:svc:store-unavailable', title: 'Store unavailable', status: 503, detail: 'frozen' },
};

test('polls on through store-unavailable answers and reports the real outcome', async () => {
  const { url, server } = await node([
    storeDown,
    storeDown,
    { status: 200, body: { id, application: 'shop', state: 'deployed', deployment: 'ab' } },
  ]);
  try {
    const status = await watchDeploy({ endpoints: [url], key, home: tempDir() }, accepted(url), undefined);
    assert.equal(status.state, 'deployed');
    assert.equal(status.deployment, 'ab');
  } finally {
    server.close();
  }
});

test('no answer for longer than the outage bound: Deploy outcome unknown, with the last code', async () => {
  const { url, server } = await node([storeDown]);
  try {
    await assert.rejects(
      watchDeploy({ endpoints: [url], key, home: tempDir() }, accepted(url), undefined, { outageMs: 2_500 }),
      (err: { code: string; title: string; detail: string; status: number }) => {
        assert.equal(err.code, 'store-unavailable');
        assert.equal(err.status, 503);
        assert.equal(err.title, 'Deploy outcome unknown');
        assert.match(err.detail, new RegExp(`deploy ${id} was accepted, but no poll .* was answered`));
        return true;
      },
    );
  } finally {
    server.close();
  }
  // No node answering at all counts the same.
  await assert.rejects(
    watchDeploy({ endpoints: [url], key, home: tempDir() }, accepted(url), undefined, { outageMs: 1_500 }),
    { title: 'Deploy outcome unknown' },
  );
});

test('a refusal about the deploy itself ends the watch at once', async () => {
  const { url, server } = await node([
    {
      status: 404,
      body: { type: 'urn:svc:not-found', title: 'No such deploy', status: 404, detail: 'gone' },
    },
  ]);
  try {
    await assert.rejects(
      watchDeploy({ endpoints: [url], key, home: tempDir() }, accepted(url), undefined, { outageMs: 60_000 }),
      { code: 'not-found', title: 'No such deploy' },
    );
  } finally {
    server.close();
  }
});

test('each poll names the state last seen; an answer held and ended by a change is followed at once', async () => {
  const { url, server, seen } = await node([
    held(ok('uploading'), 'changed'),
    held(ok('uploading'), 'unchanged'),
    held(ok('deployed', { deployment: 'ab' }), 'changed'),
  ]);
  try {
    const status = await watchDeploy({ endpoints: [url], key, home: tempDir() }, accepted(url), undefined);
    assert.equal(status.state, 'deployed');
  } finally {
    server.close();
  }
  assert.deepEqual(
    seen.map((poll) => [poll.query.get('wait'), poll.query.get('state')]),
    [
      [String(DEPLOY_WAIT_S), 'accepted'],
      [String(DEPLOY_WAIT_S), 'uploading'],
      [String(DEPLOY_WAIT_S), 'uploading'],
    ],
  );
  const [afterChange, afterNoChange] = gaps(seen);
  // accepted -> uploading was a change the node held for: asked again without the interval.
  assert.ok(afterChange! < POLL_INTERVAL_MS, `the poll after a change came ${afterChange} ms later`);
  // uploading again (its wait ended): the next poll keeps the interval.
  assert.ok(afterNoChange! >= POLL_INTERVAL_MS - ARRIVAL_SLACK_MS, `came ${afterNoChange} ms later`);
});

test('a node that ignores the wait is polled no more than once a second, changes or not', async () => {
  const { url, server, seen } = await node([
    ok('uploading'),
    ok('uploading'),
    ok('deployed', { deployment: 'ab' }),
  ]);
  try {
    const status = await watchDeploy({ endpoints: [url], key, home: tempDir() }, accepted(url), undefined);
    assert.equal(status.state, 'deployed');
  } finally {
    server.close();
  }
  assert.equal(seen.length, 3);
  for (const gap of gaps(seen))
    assert.ok(gap >= POLL_INTERVAL_MS - ARRIVAL_SLACK_MS, `a poll came ${gap} ms after the last`);
});

test('the processes watch asks for the new deployment and ends when a process is ready on it', async () => {
  const processes = (deployment: string, ready: boolean) => ({
    status: 200,
    body: {
      application: { name: 'shop' },
      processes: [{ node: 'node-a', state: 'ready', ready, deployment }],
    },
  });
  const { url, server, seen } = await node([
    held(processes('0a', true), 'changed'),
    held(processes('0b', false), 'changed'),
    held(processes('0b', true), 'changed'),
  ]);
  try {
    const verdict = await watchServing({ endpoints: [url], key, home: tempDir() }, url, 'shop', '0b');
    assert.equal(verdict, null);
  } finally {
    server.close();
  }
  assert.deepEqual(
    seen.map((poll) => [poll.query.get('wait'), poll.query.get('serving')]),
    [
      [String(SERVING_WAIT_S), '0b'],
      [String(SERVING_WAIT_S), '0b'],
      [String(SERVING_WAIT_S), '0b'],
    ],
  );
  // Each answer was held and ended by a change: asked again at once.
  for (const gap of gaps(seen)) assert.ok(gap < POLL_INTERVAL_MS, `a poll came ${gap} ms after the last`);
});
