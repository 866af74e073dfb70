// the targets in bench/RESULTS.md, Front restart behind Caddy: a single-replica application whose front is
// killed serves through the ingress again within ~2 s of the front being back. Real parts (test/helpers/
// front-restart.ts): one `svc sail` running examples/hello in the real runtime, the real svc-caddy
// with adapter/demo.Caddyfile, once as shipped and once with the passive settings it had before
// (`lb_retries 2`, `fail_duration 30s`), under the same load.
// Run: scripts/with-node node bench/front-restart.bench.ts [rounds=3] [concurrency=4]
//
// Each round: load through Caddy (keep-alive GET loops), SIGKILL to the front alone (the node's
// supervisor restarts it on the same port), the load runs on until the front answers its health with
// 200 and then until AFTER_HEALTHY_MS more went by. A request fails on any answer but 200 with
// hello's body, or on a client error.

import { readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { loadavg } from 'node:os';
import {
  type Answer,
  DEMO_CADDYFILE,
  demoCaddyfileWithProxyOptions,
  isHello,
  killFront,
  type RestartFleet,
  startRestartFleet,
  throughCaddy,
  waitFrontHealthy,
} from '../test/helpers/front-restart.ts';

const [rounds = 3, concurrency = 4] = process.argv.slice(2, 4).map(Number);
const LOAD_BEFORE_KILL_MS = 2_000;
/** Longer than the old settings' 30 s hold-out, so it shows whole. */
const AFTER_HEALTHY_MS = 35_000;

const variants = [
  { label: 'shipped', caddyfile: readFileSync(DEMO_CADDYFILE, 'utf8') },
  {
    label: 'before (lb_retries 2, fail_duration 30s)',
    caddyfile: demoCaddyfileWithProxyOptions([
      'lb_policy first',
      'lb_retries 2',
      'lb_try_duration 5s',
      'lb_try_interval 250ms',
      'fail_duration 30s',
      'max_fails 1',
    ]),
  },
];

interface Sample {
  startMs: number;
  endMs: number;
  ok: boolean;
  /** What a failure answered: `caddy <status>`, `front <status>` or the client error. */
  failure?: string;
}

async function round(fleet: RestartFleet): Promise<string> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const samples: Sample[] = [];
  const t0 = performance.now();
  let stop = false;
  const loops = Array.from({ length: concurrency }, async () => {
    while (!stop) {
      const startMs = performance.now() - t0;
      let answer: Answer | undefined;
      let error: string | undefined;
      try {
        answer = await throughCaddy(fleet, agent);
      } catch (err) {
        error = (err as Error).message;
      }
      const ok = answer !== undefined && isHello(answer);
      samples.push({
        startMs,
        endMs: performance.now() - t0,
        ok,
        failure: ok ? undefined : describe(answer, error),
      });
    }
  });
  const loadBefore = loadavg()[0]!.toFixed(1);
  await new Promise((r) => setTimeout(r, LOAD_BEFORE_KILL_MS));
  const killMs = performance.now() - t0;
  const killed = await killFront(fleet);
  await waitFrontHealthy(fleet, killed);
  const healthyMs = performance.now() - t0;
  await new Promise((r) => setTimeout(r, AFTER_HEALTHY_MS));
  stop = true;
  await Promise.all(loops);
  agent.destroy();
  const failed = samples.filter((s) => !s.ok);
  const kinds = new Map<string, number>();
  for (const s of failed) kinds.set(s.failure!, (kinds.get(s.failure!) ?? 0) + 1);
  const afterHealthy = failed.filter((s) => s.startMs > healthyMs).length;
  const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const span =
    failed.length === 0
      ? 'no failure'
      : `failures span ${seconds(Math.max(...failed.map((s) => s.endMs)) - Math.min(...failed.map((s) => s.startMs)))}, ` +
        `the last ending ${seconds(Math.max(...failed.map((s) => s.endMs)) - healthyMs)} after the front was healthy`;
  return (
    `requests ${samples.length}, failed ${failed.length} (${[...kinds].map(([k, n]) => `${n}× ${k}`).join(', ') || 'none'}); ` +
    `front healthy ${seconds(healthyMs - killMs)} after the kill; ${span}; ` +
    `${afterHealthy} failed after it; load ${loadBefore} -> ${loadavg()[0]!.toFixed(1)}`
  );
}

// Caddy's own error answers are "<status> <text>" (the Caddyfile's handle_errors), or its 404
// page when the routing document no longer names the host; the front's are its own text.
function describe(answer: Answer | undefined, error: string | undefined): string {
  if (!answer) return `client error ${error}`;
  if (answer.body.includes('No application answers on this host')) return 'caddy 404 (host left the routing)';
  const fromCaddy = /^\d{3} [A-Za-z ]+$/.test(answer.body.trim());
  return `${fromCaddy ? 'caddy' : 'front'} ${answer.status}`;
}

async function main(): Promise<void> {
  console.log(
    `front-restart bench: ${rounds} rounds per variant, ${concurrency} loops, node ${process.version}`,
  );
  for (const variant of variants) {
    const fleet = await startRestartFleet(variant.caddyfile);
    try {
      for (let i = 1; i <= rounds; i++) console.log(`  ${variant.label}, round ${i}: ${await round(fleet)}`);
    } finally {
      await fleet.stop();
    }
  }
}

await main();
