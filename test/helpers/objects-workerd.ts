// A real workerd serving a counter Durable Object class (our own worker) with its objects stored
// on local disk in a folder the caller names, as `cell serve` runs them: the tests and the bench
// of Durable Objects on the fleet (runtime/src/bindings/objects-*.ts) start it, and the caller
// moves that folder between processes.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { capnpString, workerdBinary } from '../../runtime/src/workerd.ts';
import { freePort, waitFor } from './svc.ts';

// A counter per name; `/alarm?o=` sets an alarm an hour away, `/when?o=` answers it.
const WORKER = `
import { DurableObject } from 'cloudflare:workers';
export class Counter extends DurableObject {
  async fetch(request) {
    const path = new URL(request.url).pathname;
    if (path === '/alarm') { await this.ctx.storage.setAlarm(Date.now() + 3_600_000); return new Response('set'); }
    if (path === '/when') return new Response(String(await this.ctx.storage.getAlarm()));
    if (path === '/get') return new Response(String(this.ctx.storage.kv.get('n') ?? 0));
    const n = (this.ctx.storage.kv.get('n') ?? 0) + 1;
    this.ctx.storage.kv.put('n', n);
    return new Response(String(n));
  }
  async alarm() {}
}
export default {
  fetch(request, env) {
    const name = new URL(request.url).searchParams.get('o') ?? 'a';
    return env.COUNTER.getByName(name).fetch(request);
  },
};
`;

export interface Workerd {
  url: string;
  process: ChildProcess;
  stop: () => Promise<void>;
}

/** Every workerd started and not stopped yet: a test's `after` stops them. */
export const runningWorkerds = new Set<Workerd>();

/** Real workerd serving the counter with its objects stored in `storageDir`. */
export async function startCounterWorkerd(storageDir: string): Promise<Workerd> {
  const dir = mkdtempSync(join(tmpdir(), 'objects-workerd-'));
  const port = await freePort();
  writeFileSync(join(dir, 'worker.js'), WORKER);
  writeFileSync(
    join(dir, 'config.capnp'),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "main", worker = .worker), (name = "storage", disk = (path = ${capnpString(storageDir)}, writable = true)) ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
);
const worker :Workerd.Worker = (
  compatibilityDate = "2025-04-01",
  modules = [ (name = "worker.js", esModule = embed "worker.js") ],
  durableObjectNamespaces = [ (className = "Counter", uniqueKey = "app-Counter", enableSql = true) ],
  durableObjectStorage = (localDisk = "storage"),
  bindings = [ (name = "COUNTER", durableObjectNamespace = "Counter") ],
);
`,
  );
  const child = spawn(workerdBinary(), ['serve', join(dir, 'config.capnp'), '--experimental'], {
    stdio: 'ignore',
  });
  const exited = once(child, 'exit');
  const w: Workerd = {
    url: `http://127.0.0.1:${port}`,
    process: child,
    stop: async () => {
      runningWorkerds.delete(w);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  runningWorkerds.add(w);
  await waitFor(async () => (await fetch(`${w.url}/get`)).ok, 'workerd to answer');
  return w;
}

export async function call(w: Workerd, path: string): Promise<string> {
  const answer = await fetch(`${w.url}${path}`);
  assert.equal(answer.status, 200, `${path}: ${answer.status}`);
  return answer.text();
}
