// A single-replica application behind the shipped demo Caddyfile whose front is killed and comes
// back (docs/ingress.md "Upstream health at the ingress"): one real `svc sail` on a local-directory
// bucket running examples/hello in the real runtime (runtime/bin/cell, workerd), and the real
// svc-caddy. Shared by test/ingress-recovery.test.ts and bench/front-restart.bench.ts.

import { readFileSync } from 'node:fs';
import { type Agent, request } from 'node:http';
import { join, resolve } from 'node:path';
import { type Bucket, keyArg, openBucket } from './applications.ts';
import { type CaddyProcess, ensureCaddyBuilt, startCaddy } from './caddy.ts';
import { copyProject, EXAMPLES, isRunning } from './cell.ts';
import { IngressClient } from './ingress-client.ts';
import { freePort, runSvc, type SailProcess, startSail, tempDir, waitFor } from './svc.ts';

export const DEMO_CADDYFILE = resolve(import.meta.dirname, '..', '..', 'adapter', 'demo.Caddyfile');
export const HOST = 'hello.svc.localhost';
const TOKEN = 'front-restart-ingress-token-0123456789';
const HELLO = 'Hello from svc!';
const DEPLOY_DEADLINE_MS = 120_000;
const SERVE_DEADLINE_MS = 60_000;

export interface RestartFleet {
  bucket: Bucket;
  node: SailProcess;
  caddy: CaddyProcess;
  /** Caddy's plain-HTTP port. */
  httpPort: number;
  /** The application's upstream as the routing document names it. */
  upstream: string;
  stop(): Promise<void>;
}

/**
 * A node serving hello and Caddy (running `caddyfile`, the demo's layout) routing to it, polling
 * the node every `pollInterval` (Caddy's duration syntax; the adapter's default when absent).
 */
export async function startRestartFleet(caddyfile: string, pollInterval?: string): Promise<RestartFleet> {
  ensureCaddyBuilt();
  const bucket = await openBucket();
  const started: { node?: SailProcess; caddy?: CaddyProcess } = {};
  try {
    const signer = await bucket.operator('restart-admin', 'admin', ['*']);
    started.node = await startSail([
      ...['--endpoint', bucket.endpoint, '--platform-domains', 'svc.localhost', '--ingress-token', TOKEN],
    ]);
    const node = started.node;
    const deployed = await runSvc(
      ['deploy', copyProject(join(EXAMPLES, 'hello')), '--node', node.url, '--key', keyArg(signer)],
      {
        timeoutMs: DEPLOY_DEADLINE_MS,
      },
    );
    if (deployed.code !== 0) throw new Error(`svc deploy exited ${deployed.code}:\n${deployed.stderr}`);
    const routing = new IngressClient(node.url, TOKEN);
    const upstream: string = await waitFor(
      async () => (await routing.routes()).routes.find((r) => r.host === HOST)?.upstreams[0]?.address ?? '',
      `the node to route ${HOST}`,
      SERVE_DEADLINE_MS,
    );
    const httpPort = await freePort();
    started.caddy = await startCaddy(caddyfile, httpPort, {
      DEMO_HTTP_PORT: String(httpPort),
      DEMO_ADMIN_PORT: String(await freePort()),
      SVC_FLEET_ENDPOINT: node.url,
      SVC_FLEET_TOKEN: TOKEN,
      SVC_FLEET_HTTP_REDIRECT: 'off',
      ...(pollInterval ? { SVC_FLEET_POLL_INTERVAL: pollInterval } : {}),
      SVC_ACCESS_LOG: join(tempDir('svc-restart-log-'), 'access.log'),
    });
    const fleet: RestartFleet = {
      bucket,
      node,
      caddy: started.caddy,
      httpPort,
      upstream,
      async stop() {
        await started.caddy?.stop();
        await node.stop();
        await bucket.close();
      },
    };
    await waitFor(async () => isHello(await throughCaddy(fleet)), 'hello through Caddy', SERVE_DEADLINE_MS);
    return fleet;
  } catch (err) {
    await started.caddy?.stop();
    await started.node?.stop();
    await bucket.close();
    throw err;
  }
}

/** The demo Caddyfile with its reverse_proxy options replaced (the bench's comparison). */
export function demoCaddyfileWithProxyOptions(options: string[]): string {
  const text = readFileSync(DEMO_CADDYFILE, 'utf8');
  const replaced = text.replace(
    /(\treverse_proxy \{\n\t\tdynamic svc\n)(?:\t\t[^\n]*\n)*?(\t\})/,
    (_, head: string, tail: string) => `${head}${options.map((o) => `\t\t${o}\n`).join('')}${tail}`,
  );
  if (replaced === text) throw new Error(`${DEMO_CADDYFILE}: no reverse_proxy block to replace`);
  return replaced;
}

/** The pid of the application's front (`cell serve`, which becomes cell-front), from processes.json. */
export function frontPid(fleet: RestartFleet): number {
  const noted = JSON.parse(readFileSync(join(fleet.node.stateDir, 'processes.json'), 'utf8')) as {
    processes: { application: string; pid: number }[];
  };
  const pid = noted.processes.find((p) => p.application === 'hello')?.pid;
  if (!pid) throw new Error(`processes.json names no process for hello: ${JSON.stringify(noted)}`);
  return pid;
}

/**
 * SIGKILL to the front alone, as a crash: the supervisor restarts it on the same port. Resolves
 * once the killed process is gone.
 */
export async function killFront(fleet: RestartFleet): Promise<number> {
  const pid = frontPid(fleet);
  process.kill(pid, 'SIGKILL');
  await waitFor(() => !isRunning(pid), `the front (pid ${pid}) to exit`, 10_000);
  return pid;
}

/** Polls the front's own health on its port until a new process answers 200 (ready). */
export async function waitFrontHealthy(fleet: RestartFleet, killedPid: number): Promise<void> {
  await waitFor(
    async () => {
      const health = await get(fleet.upstream, HOST, '/.well-known/cell/health');
      return health.status === 200 && frontPid(fleet) !== killedPid;
    },
    'the restarted front to answer its health with 200',
    SERVE_DEADLINE_MS,
  );
}

export interface Answer {
  status: number;
  body: string;
}

export function isHello(answer: Answer): boolean {
  return answer.status === 200 && answer.body.startsWith(HELLO);
}

/** GET / of hello through Caddy's plain-HTTP port. */
export function throughCaddy(fleet: RestartFleet, agent?: Agent): Promise<Answer> {
  return get(`127.0.0.1:${fleet.httpPort}`, HOST, '/', agent);
}

/** A plain-HTTP GET with a Host header (fetch cannot set Host). */
function get(address: string, host: string, path: string, agent?: Agent): Promise<Answer> {
  const colon = address.lastIndexOf(':');
  return new Promise((resolveAnswer, reject) => {
    const req = request(
      {
        host: address.slice(0, colon),
        port: Number(address.slice(colon + 1)),
        path,
        headers: { host },
        agent: agent ?? false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, body }));
      },
    );
    req.setTimeout(15_000, () => req.destroy(new Error('timed out after 15 s')));
    req.on('error', reject);
    req.end();
  });
}
