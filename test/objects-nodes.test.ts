// Durable Objects moving between nodes (docs/bindings.md "Durable Objects on the fleet"): two
// and three node processes (test/helpers/objects-node.ts: the objects' lease and shipping of
// runtime/src/bindings/objects-*.ts, each serving real workerd while it holds the objects) on one
// real MinIO bucket. A counter incremented under load through the holder; the holder killed with
// SIGKILL (its process group: the node and its workerd): another node takes the objects over with
// every increment acknowledged before its last ship pass began; the holder stopped with SIGSTOP
// past its lease: another node takes over, and the woken holder stops its workerd and never
// writes the objects' storage again.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { s3BucketEnv } from './helpers/cell.ts';
import { type MinioBucketOptions, useMinio } from './helpers/minio.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const NODE_SCRIPT = resolve(import.meta.dirname, 'helpers', 'objects-node.ts');
const TTL_MS = 4_000;

const minio = await useMinio();

interface NodeEvent {
  serving?: string;
  stopped?: string;
  shipped?: number;
  atMs: number;
}

interface ObjectsNode {
  name: string;
  child: ChildProcess;
  events: NodeEvent[];
  serving(): string | null;
  signal(signal: NodeJS.Signals): void;
}

const started: ObjectsNode[] = [];
after(async () => {
  for (const node of started) {
    if (node.child.exitCode !== null || node.child.signalCode !== null) continue;
    const exited = once(node.child, 'exit');
    node.signal('SIGCONT');
    node.signal('SIGKILL');
    await exited;
  }
});

/** A node process in a process group of its own (it and its workerd). */
function startNode(name: string, bucket: MinioBucketOptions): ObjectsNode {
  const child = spawn(process.execPath, [NODE_SCRIPT], {
    detached: true,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      ...s3BucketEnv(bucket),
      OBJECTS_NODE: name,
      OBJECTS_DATA_DIR: tempDir(`objects-${name}-`),
      OBJECTS_TTL_MS: String(TTL_MS),
    },
  });
  const events: NodeEvent[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    events.push({ ...JSON.parse(line), atMs: Date.now() });
  });
  const node: ObjectsNode = {
    name,
    child,
    events,
    serving() {
      const last = events.filter((e) => e.serving || e.stopped).at(-1);
      return last?.serving ?? null;
    },
    signal(signal) {
      try {
        process.kill(-(child.pid as number), signal);
      } catch {}
    },
  };
  started.push(node);
  return node;
}

async function bucket(): Promise<MinioBucketOptions> {
  return minio.bucketOptions(await minio.createBucket());
}

async function increment(url: string): Promise<number> {
  const answer = await fetch(`${url}/inc?o=shared`, { signal: AbortSignal.timeout(5_000) });
  assert.equal(answer.status, 200);
  return Number(await answer.text());
}

async function count(url: string): Promise<number> {
  return Number(await (await fetch(`${url}/get?o=shared`)).text());
}

/** Increments through `url` one after another until stopped or a request fails; answers each one's time. */
function load(url: string) {
  const answered: number[] = [];
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      try {
        const n = await increment(url);
        answered[n] = Date.now();
      } catch {
        return;
      }
    }
  })();
  return {
    answered,
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}

/** The node among `nodes` that serves the objects once exactly one does. */
async function theServing(nodes: ObjectsNode[], what: string): Promise<ObjectsNode> {
  return waitFor(
    () => {
      const serving = nodes.filter((n) => n.serving());
      assert.ok(serving.length <= 1, `two nodes serve at once: ${serving.map((n) => n.name)}`);
      return serving[0];
    },
    what,
    60_000,
  );
}

async function killedUnderLoad(t: { diagnostic: (m: string) => void }, names: string[]): Promise<void> {
  const options = await bucket();
  const [first, ...others] = names;
  const holder = startNode(first as string, options);
  const url = (await theServing([holder], 'the first node to hold the objects')).serving() as string;
  const standbys = others.map((name) => startNode(name, options));
  const traffic = load(url);
  // Under load until two passes shipped the counter's file.
  const shippedFrom = holder.events.length;
  await waitFor(() => holder.events.slice(shippedFrom).filter((e) => e.shipped).length >= 2, 'two passes');
  holder.signal('SIGKILL');
  const killedAt = Date.now();
  await traffic.stop();
  const acknowledged = traffic.answered.length - 1;
  const lastPassStart = Math.max(...holder.events.filter((e) => e.shipped).map((e) => e.shipped as number));
  const mustKeep = traffic.answered.filter((at) => at !== undefined && at < lastPassStart).length;

  const next = await theServing(standbys, 'a standby to take the objects over');
  const takeoverMs = Date.now() - killedAt;
  const kept = await count(next.serving() as string);
  t.diagnostic(
    `takeover ${takeoverMs} ms; acknowledged ${acknowledged}, kept ${kept}, ${mustKeep} acknowledged before the last pass began`,
  );
  assert.ok(kept >= mustKeep, `kept ${kept}, but ${mustKeep} were acknowledged before the last pass began`);
  assert.ok(
    kept <= acknowledged + 1,
    `kept ${kept} of ${acknowledged} acknowledged (one more may be unanswered)`,
  );
  // The new holder serves on from there; every other standby stays one.
  assert.equal(await increment(next.serving() as string), kept + 1);
  for (const other of standbys.filter((n) => n !== next)) assert.equal(other.serving(), null);
}

test('two nodes: kill -9 of the holder under load; the other takes the objects over with every increment acknowledged before its last ship pass', async (t) => {
  await killedUnderLoad(t, ['a', 'b']);
});

test('three nodes: kill -9 of the holder under load; exactly one of the others takes the objects over', async (t) => {
  await killedUnderLoad(t, ['a', 'b', 'c']);
});

test('a holder stopped past its lease: another node takes over, and once woken the former holder stops its workerd and never writes the storage again', async () => {
  const options = await bucket();
  const a = startNode('a', options);
  const aUrl = (await theServing([a], 'a to hold the objects')).serving() as string;
  const b = startNode('b', options);
  for (let i = 0; i < 10; i++) await increment(aUrl);
  const shippedAt = Date.now();
  await waitFor(
    () => a.events.some((e) => e.shipped !== undefined && e.shipped > shippedAt),
    'a pass after the writes',
  );
  a.signal('SIGSTOP');
  const bUrl = (await theServing([b], 'b to take the objects over')).serving() as string;
  assert.equal(await count(bUrl), 10);
  for (let i = 0; i < 5; i++) await increment(bUrl);

  const wokenFrom = a.events.length;
  a.signal('SIGCONT');
  await waitFor(() => a.events.slice(wokenFrom).some((e) => e.stopped), 'a to stop serving', 30_000);
  const woken = a.events.slice(wokenFrom);
  assert.match(woken.find((e) => e.stopped)?.stopped ?? '', /lease ran out|another node/);
  assert.equal(woken.filter((e) => e.shipped).length, 0, 'a shipped nothing after it woke');
  await assert.rejects(fetch(`${aUrl}/get?o=shared`), 'the former holder no longer answers');
  // b's storage is what the bucket keeps: a pass of b after a woke, then a take by a third node.
  const afterWake = Date.now();
  await waitFor(() => b.events.some((e) => e.shipped !== undefined && e.shipped > afterWake), 'a pass of b');
  assert.equal(await count(bUrl), 15);
  b.signal('SIGKILL');
  const c = startNode('c', options);
  const cUrl = (await theServing([a, c], 'a node to take the objects over from b')).serving() as string;
  assert.equal(await count(cUrl), 15);
});
