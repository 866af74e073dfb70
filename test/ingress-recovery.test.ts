// docs/ingress.md "Upstream health at the ingress": with the shipped Caddyfiles, a single-replica
// application whose front dies serves through the ingress again as soon as its front is healthy,
// not after a long passive hold-out of its only upstream. Real parts: one `svc sail` running
// examples/hello in the real runtime and the real svc-caddy with adapter/demo.Caddyfile as shipped
// (test/helpers/front-restart.ts). The seconds of failure are measured by
// bench/front-restart.bench.ts (bench/RESULTS.md).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { after, before, test } from 'node:test';
import { DEFAULT_CADDYFILE } from './helpers/caddy.ts';
import {
  type Answer,
  DEMO_CADDYFILE,
  isHello,
  killFront,
  type RestartFleet,
  startRestartFleet,
  throughCaddy,
  waitFrontHealthy,
} from './helpers/front-restart.ts';
import { waitFor } from './helpers/svc.ts';

const LOOPS = 2;
const REQUESTS_AFTER_HEALTHY = 20;

let fleet: RestartFleet;

// Caddy keeps its first routing document: a node pass that falls inside the restart drops the
// not-ready process from the node's routing until the next pass, which is the routing's doing, not
// the ingress's; this test is about what Caddy does with an upstream that failed.
const POLL_INTERVAL = '1h';

before(async () => {
  fleet = await startRestartFleet(readFileSync(DEMO_CADDYFILE, 'utf8'), POLL_INTERVAL);
});

after(async () => {
  await fleet?.stop();
});

interface Sample {
  startedAt: number;
  endedAt: number;
  answer?: Answer;
  error?: string;
}

test('a lone upstream whose front restarted serves through Caddy again once the front is healthy', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: LOOPS });
  const samples: Sample[] = [];
  let stop = false;
  // Load through the restart, so Caddy sees the dead front fail right up to its return.
  const loops = Array.from({ length: LOOPS }, async () => {
    while (!stop) {
      const startedAt = performance.now();
      try {
        const answer = await throughCaddy(fleet, agent);
        samples.push({ startedAt, endedAt: performance.now(), answer });
      } catch (err) {
        samples.push({ startedAt, endedAt: performance.now(), error: (err as Error).message });
      }
    }
  });
  let killedAt = 0;
  let healthyAt = 0;
  try {
    killedAt = performance.now();
    const killed = await killFront(fleet);
    await waitFrontHealthy(fleet, killed);
    healthyAt = performance.now();
    const fresh = await throughCaddy(fleet);
    assert.ok(
      isHello(fresh),
      `first request after the front is healthy: ${fresh.status} ${fresh.body.slice(0, 200)}`,
    );
    await waitFor(
      () => samples.filter((s) => s.startedAt > healthyAt).length >= REQUESTS_AFTER_HEALTHY,
      `${REQUESTS_AFTER_HEALTHY} requests through Caddy after the front is healthy`,
    );
  } finally {
    stop = true;
    await Promise.all(loops);
    agent.destroy();
  }
  const down = samples.filter((s) => s.endedAt > killedAt && s.startedAt < healthyAt);
  assert.ok(down.length > 0, 'no request through Caddy was under way while the front was down');
  const failedAfter = samples
    .filter((s) => s.startedAt > healthyAt && !(s.answer && isHello(s.answer)))
    .map((s) => s.error ?? `${s.answer!.status} ${s.answer!.body.slice(0, 120)}`);
  assert.deepEqual(failedAfter, [], 'requests through Caddy that failed after the front was healthy');
});

test('the image Caddyfile proxies with the same options as the demo one', () => {
  const options = (file: string) => {
    const block = /\treverse_proxy \{\n([\s\S]*?)\n\t\}/.exec(readFileSync(file, 'utf8'));
    assert.ok(block, `${file} has no reverse_proxy block`);
    return block[1]!
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '');
  };
  assert.deepEqual(options(DEFAULT_CADDYFILE), options(DEMO_CADDYFILE));
});
