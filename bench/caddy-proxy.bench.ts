// the targets in bench/RESULTS.md, Adapter request routing: Caddy with the `svc` dynamic upstream source serves
// at least 95% of the requests per second of the same Caddy with a static upstream to the same
// backend, measured in one run. Needs wrk (`apt-get install wrk`) and .tools/bin/svc-caddy.
// Run: scripts/with-node node bench/caddy-proxy.bench.ts [seconds per round] [rounds] [connections]
//
// One Caddy process holds three sites: a static `reverse_proxy 127.0.0.1:<backend>`, the same
// proxy with `dynamic svc`, and the backend itself (`respond`), so both sides share the process,
// the backend and the machine. The routing document comes from a STAND-IN for the node's routing
// route (a fixed FleetRouting naming the backend, behind the ingress token): the adapter polls it
// every 5 s, so the node's cost is not part of a request. Rounds alternate static and dynamic so
// that drift from other load on the machine hits both sides alike.

import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import type { FleetRouting } from '../src/routing/types.ts';
import { ensureCaddyBuilt, startCaddy } from '../test/helpers/caddy.ts';
import { freePort, waitFor } from '../test/helpers/svc.ts';
import { wrkRequestsPerSecond, wrkVersion } from './wrk.ts';

const run = promisify(execFile);
const [seconds = 10, rounds = 3, connections = 64] = process.argv.slice(2).map(Number);
const HOST = 'shop.svc.test';
const TOKEN = 'bench-token';
const TARGET = 0.95;

async function main(): Promise<void> {
  ensureCaddyBuilt();
  const [staticPort, dynamicPort, backendPort] = [await freePort(), await freePort(), await freePort()];
  const doc: FleetRouting = {
    v: 1,
    routes: [
      { host: HOST, application: 'shop', upstreams: [{ node: 'n1', address: `127.0.0.1:${backendPort}` }] },
    ],
  };
  const routing = createServer((req, res) => {
    const ok = req.headers.authorization === `Bearer ${TOKEN}` && req.url?.startsWith('/v1/ingress/routes');
    res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
    res.end(ok ? JSON.stringify(doc) : '{}');
  });
  await new Promise<void>((resolve) => routing.listen(0, '127.0.0.1', resolve));
  const routingPort = (routing.address() as AddressInfo).port;

  // The same proxy options on both sides (those of adapter/Caddyfile), only the upstream source differs.
  const proxyOptions = 'lb_policy first\n\t\tlb_retries 2\n\t\tfail_duration 30s\n\t\tmax_fails 1';
  const caddyfile = `{
	admin off
	auto_https off
	svc {
		fleet bench {
			endpoint http://127.0.0.1:${routingPort}
			token ${TOKEN}
		}
	}
}
http://:${staticPort} {
	reverse_proxy 127.0.0.1:${backendPort} {
		${proxyOptions}
	}
}
http://:${dynamicPort} {
	reverse_proxy {
		dynamic svc
		${proxyOptions}
	}
}
http://:${backendPort} {
	respond "ok" 200
}
`;
  const caddy = await startCaddy(caddyfile, dynamicPort);
  try {
    // The first document may still be on its way (a poller's first fetch does not hold up startup).
    await waitFor(async () => {
      // curl: fetch() does not send a Host header of the caller's choosing.
      for (const port of [staticPort, dynamicPort]) {
        const { stdout } = await run('curl', [
          '-s',
          '-m',
          '2',
          '-H',
          `Host: ${HOST}`,
          `http://127.0.0.1:${port}/`,
        ]);
        if (stdout !== 'ok') return false;
      }
      return true;
    }, 'both sides to answer ok').catch((err) => {
      throw new Error(`${err.message}\n--- svc-caddy output ---\n${caddy.log()}`);
    });
    const version = await wrkVersion();
    console.log(
      `caddy proxy bench: ${rounds} rounds of ${seconds} s per side, ${connections} connections, wrk -t1 ` +
        `(${version}; node ${process.version})`,
    );
    await wrk(staticPort, 2); // warm-up, both sides
    await wrk(dynamicPort, 2);
    const results = { static: [] as number[], dynamic: [] as number[] };
    for (let i = 0; i < rounds; i++) {
      // Alternate which side goes first, so neither always runs on a warmer machine.
      const order = i % 2 === 0 ? (['static', 'dynamic'] as const) : (['dynamic', 'static'] as const);
      for (const side of order) {
        const rps = await wrk(side === 'static' ? staticPort : dynamicPort, seconds);
        results[side].push(rps);
        console.log(`  round ${i + 1} ${side.padEnd(7)} ${rps.toFixed(0)} req/s`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const s = median(results.static);
    const d = median(results.dynamic);
    // Each round's two runs are adjacent in time, so their ratio is the least disturbed by drift.
    const paired = median(results.dynamic.map((rps, i) => rps / results.static[i]));
    console.log(
      `static median ${s.toFixed(0)} req/s, dynamic svc median ${d.toFixed(0)} req/s, ` +
        `ratio of medians ${(d / s).toFixed(3)}, median of per-round ratios ${paired.toFixed(3)} ` +
        `(target ${TARGET}: ${paired >= TARGET ? 'met' : 'NOT met'})`,
    );
  } finally {
    await caddy.stop();
    routing.close();
  }
}

/** Requests per second wrk measured against `port` with the application's Host header. */
function wrk(port: number, duration: number): Promise<number> {
  return wrkRequestsPerSecond(`http://127.0.0.1:${port}/`, {
    seconds: duration,
    connections,
    headers: [`Host: ${HOST}`],
  });
}

await main();
