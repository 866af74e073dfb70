// Polling a deploy through failed polls (docs/deploys.md "svc deploy", step 8), against a
// loopback stand-in for the node's `GET /v1/deploys/:id` (the node API is the seam): a poll that
// no node answers, or that a node answers 5xx, is no outcome and polling goes on; past the outage
// bound the command fails with the last code, title Deploy outcome unknown; any other refusal is
// final at once.

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { tempDir } from '../../test/helpers/svc.ts';
import { generateOperatorKey } from '../auth/key-file.ts';
import type { Accepted } from './deploy-upload.ts';
import { watchDeploy } from './deploy-watch.ts';

const key = generateOperatorKey('op-watch');
const id = 'shop.0123456789abcdef';

function accepted(endpoint: string): Accepted {
  return {
    status: { id, application: 'shop', state: 'accepted' },
    location: `/v1/deploys/${id}`,
    endpoint,
  };
}

/** A node stand-in answering the n-th poll with `answers[n]` (the last one from then on). */
async function node(answers: { status: number; body: unknown }[]): Promise<{ url: string; server: Server }> {
  let polls = 0;
  const server = createServer((_request, response) => {
    const answer = answers[Math.min(polls++, answers.length - 1)]!;
    const type = answer.status >= 400 ? 'application/problem+json' : 'application/json';
    response.writeHead(answer.status, { 'content-type': type }).end(JSON.stringify(answer.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

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
