// The store contract (docs/architecture.md "How a request flows"): one
// suite run against both backends, a real MinIO through the S3 store and a temporary
// directory through the directory store, each opened by openStore as `svc sail` opens it.

import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { Problem } from '../src/problem.ts';
import { type OpenStoreOptions, openStore } from '../src/store/open.ts';
import { CasConflict, type Store } from '../src/store/store.ts';
import { UPDATE_TRIES, updateJson } from '../src/store/update.ts';
import { useMinio } from './helpers/minio.ts';
import { tempDir } from './helpers/svc.ts';

const RACERS = 6;
const ROUNDS = 5;
const RACER = resolve(import.meta.dirname, 'helpers', 'store-racer.ts');

/** How a backend gives each test a fresh, empty bucket. */
interface Backend {
  name: string;
  /** Options naming a new empty bucket. */
  fresh(): Promise<OpenStoreOptions>;
}

// Started here, at the top level, so that MinIO lives until the whole file has run.
const minioStarting = useMinio();
minioStarting.catch(() => {}); // reported by the first test that needs it

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const backends: Backend[] = [
  {
    name: 'directory store',
    async fresh() {
      const dir = tempDir('svc-store-');
      dirs.push(dir);
      return { endpoint: pathToFileURL(dir).href };
    },
  },
  {
    name: 'S3 store on MinIO',
    async fresh() {
      const minio = await minioStarting;
      return minio.bucketOptions(await minio.createBucket());
    },
  },
];

for (const backend of backends) {
  describe(`store contract: ${backend.name}`, () => {
    const opened: Store[] = [];
    const open = async (options?: OpenStoreOptions) => {
      const store = await openStore(options ?? (await backend.fresh()));
      opened.push(store);
      return store;
    };
    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
    });

    it('conditional create: If-None-Match * writes once, then refuses', async () => {
      const store = await open();
      const etag = await store.put('a/created.json', 'first', { ifNoneMatch: '*' });
      await assert.rejects(
        store.put('a/created.json', 'second', { ifNoneMatch: '*' }),
        isConflictOn('a/created.json'),
      );
      const stored = await store.get('a/created.json');
      assert.equal(text(stored!.body), 'first');
      assert.equal(stored!.etag, etag);
    });

    it('conditional replace: If-Match the current ETag (quoted or not) writes; stale or missing refuses', async () => {
      const store = await open();
      const first = await store.put('k', 'one');
      const second = await store.put('k', 'two', { ifMatch: first });
      assert.notEqual(second, first);
      await assert.rejects(store.put('k', 'stale', { ifMatch: first }), isConflictOn('k'));
      const third = await store.put('k', 'three', { ifMatch: second.replaceAll('"', '') });
      assert.equal(text((await store.get('k'))!.body), 'three');
      assert.equal((await store.stat('k'))!.etag, third);
      await assert.rejects(store.put('absent', 'x', { ifMatch: third }), isConflictOn('absent'));
      assert.equal(await store.get('absent'), null);
    });

    it('a lost race gives exactly one CasConflict per loser', async () => {
      const store = await open();
      const base = await store.put('race', 'base');
      const replaces = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => store.put('race', `writer ${i}`, { ifMatch: base })),
      );
      assertOneWinner(replaces);
      const creates = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => store.put('fresh', `creator ${i}`, { ifNoneMatch: '*' })),
      );
      const winner = assertOneWinner(creates);
      assert.equal((await store.stat('fresh'))!.etag, winner);
    });

    it('delete: plain, conditional, stale and absent', async () => {
      const store = await open();
      const etag = await store.put('d/one', 'x');
      assert.equal(await store.delete('d/one'), true);
      assert.equal(await store.get('d/one'), null);
      assert.equal(await store.delete('d/one'), false);

      const kept = await store.put('d/two', 'y');
      await store.put('d/two', 'z', { ifMatch: kept });
      await assert.rejects(store.delete('d/two', { ifMatch: kept }), isConflictOn('d/two'));
      assert.equal(text((await store.get('d/two'))!.body), 'z');
      const current = (await store.stat('d/two'))!.etag;
      assert.equal(await store.delete('d/two', { ifMatch: current }), true);
      assert.equal(await store.stat('d/two'), null);

      await assert.rejects(store.delete('d/never', { ifMatch: etag }), isConflictOn('d/never'));
      // A delete leaves no trace a listing could show.
      assert.deepEqual(await store.list('d/', { recursive: true }), { objects: [], prefixes: [] });
      assert.deepEqual(await store.list('', { recursive: false }), { objects: [], prefixes: [] });
    });

    it('list: recursive and one level, in UTF-8 key order, with ETag, size and time', async () => {
      const store = await open();
      const started = Date.now();
      const etags = new Map<string, string>();
      for (const key of ['a/b/c', 'a/d', 'a/e/f', 'a/e/g', 'ab', 'x/y', 'a/\u{1f600}', 'a/\ufffd']) {
        etags.set(key, await store.put(key, `body of ${key}`));
      }
      const all = await store.list('a/', { recursive: true });
      assert.deepEqual(
        all.objects.map((o) => o.key),
        ['a/b/c', 'a/d', 'a/e/f', 'a/e/g', 'a/\ufffd', 'a/\u{1f600}'],
      );
      assert.deepEqual(all.prefixes, []);
      for (const object of all.objects) {
        assert.equal(object.etag, etags.get(object.key));
        assert.equal(object.size, Buffer.byteLength(`body of ${object.key}`));
        assert.ok(object.modified instanceof Date);
        assert.ok(
          Math.abs(object.modified.getTime() - started) < 60_000,
          `${object.key} modified ${object.modified}`,
        );
      }
      const level = await store.list('a/', { recursive: false });
      assert.deepEqual(
        level.objects.map((o) => o.key),
        ['a/d', 'a/\ufffd', 'a/\u{1f600}'],
      );
      assert.deepEqual(level.prefixes, ['a/b/', 'a/e/']);
      const top = await store.list('a', { recursive: false });
      assert.deepEqual(
        top.objects.map((o) => o.key),
        ['ab'],
      );
      assert.deepEqual(top.prefixes, ['a/']);
      const root = await store.list('', { recursive: false });
      assert.deepEqual(
        root.objects.map((o) => o.key),
        ['ab'],
      );
      assert.deepEqual(root.prefixes, ['a/', 'x/']);
      assert.deepEqual(await store.list('nothing/', { recursive: true }), { objects: [], prefixes: [] });
    });

    it('list: every page past 1,000 keys, recursive and one level', async () => {
      const store = await open();
      // Half objects at the top level, half one level down: 1,050 entries either way.
      const keys = Array.from({ length: 1_050 }, (_, i) => {
        const name = String(i).padStart(4, '0');
        return i % 2 === 0 ? `p/${name}` : `p/${name}/o`;
      });
      await eachLimited(keys, 16, (key) => store.put(key, key));
      const all = await store.list('p/', { recursive: true });
      assert.equal(all.objects.length, 1_050);
      assert.deepEqual(
        all.objects.map((o) => o.key),
        [...keys].sort(),
      );
      const level = await store.list('p/', { recursive: false });
      assert.equal(level.objects.length + level.prefixes.length, 1_050);
      assert.deepEqual(
        level.objects.map((o) => o.key),
        keys.filter((k) => !k.endsWith('/o')),
      );
      assert.deepEqual(
        level.prefixes,
        keys.filter((k) => k.endsWith('/o')).map((k) => k.slice(0, -1)),
      );
    });

    it('stat: what a listing knows of one object; null when absent', async () => {
      const store = await open();
      const etag = await store.put('s/thing.json', '{"a":1}');
      const info = await store.stat('s/thing.json');
      assert.equal(info!.key, 's/thing.json');
      assert.equal(info!.etag, etag);
      assert.equal(info!.size, 7);
      const listed = (await store.list('s/', { recursive: true })).objects[0]!;
      assert.equal(listed.etag, info!.etag);
      assert.equal(listed.size, info!.size);
      assert.equal(await store.stat('s/missing.json'), null);
      assert.equal(await store.stat('s'), null);
    });

    it('binary values round-trip byte for byte, empty ones too', async () => {
      const store = await open();
      const every = Uint8Array.from({ length: 512 }, (_, i) => i % 256);
      const large = new Uint8Array(randomBytes(1 << 20));
      for (const [key, body] of [
        ['bin/every', every],
        ['bin/large', large],
        ['bin/empty', new Uint8Array()],
      ] as const) {
        const etag = await store.put(key, body);
        // Before any read: a directory bucket hashes the file here, a small one whole and a large
        // one (1 MiB) in a stream, and both must name the bytes put wrote.
        assert.equal((await store.stat(key))!.etag, etag, `${key}: stat's ETag`);
        const stored = await store.get(key);
        assert.equal(stored!.size, body.byteLength);
        assert.equal(stored!.etag, etag);
        assert.ok(Buffer.from(stored!.body).equals(Buffer.from(body)), `${key} came back changed`);
      }
      // A string body is stored as its UTF-8 bytes.
      await store.put('bin/text', 'h\u00e9\u{1f600}');
      assert.deepEqual([...(await store.get('bin/text'))!.body], [...Buffer.from('h\u00e9\u{1f600}')]);
    });

    it('prefix isolation: two stores on one bucket with different prefixes', async () => {
      const options = await backend.fresh();
      const one = await open({ ...options, prefix: 'fleet-one' });
      const two = await open({ ...options, prefix: '/fleet-two/' });
      const whole = await open(options);
      await one.put('_svc/fleet/coordinator.json', 'one');
      await two.put('_svc/fleet/coordinator.json', 'two', { ifNoneMatch: '*' });
      assert.equal(text((await one.get('_svc/fleet/coordinator.json'))!.body), 'one');
      assert.equal(text((await two.get('_svc/fleet/coordinator.json'))!.body), 'two');
      assert.deepEqual(
        (await one.list('', { recursive: true })).objects.map((o) => o.key),
        ['_svc/fleet/coordinator.json'],
      );
      assert.deepEqual((await two.list('', { recursive: false })).prefixes, ['_svc/']);
      assert.deepEqual(
        (await whole.list('', { recursive: true })).objects.map((o) => o.key),
        ['fleet-one/_svc/fleet/coordinator.json', 'fleet-two/_svc/fleet/coordinator.json'],
      );
      assert.equal((await two.stat('_svc/fleet/coordinator.json'))!.key, '_svc/fleet/coordinator.json');
      assert.equal((await two.get('_svc/fleet/coordinator.json'))!.key, '_svc/fleet/coordinator.json');
      assert.equal(await one.delete('_svc/fleet/coordinator.json'), true);
      assert.equal(await one.stat('_svc/fleet/coordinator.json'), null);
      assert.equal(text((await two.get('_svc/fleet/coordinator.json'))!.body), 'two');
      for (const prefix of ['a//b', '..', 'fleet/./x']) {
        await assert.rejects(
          openStore({ ...options, prefix }),
          (err: unknown) =>
            err instanceof Problem &&
            err.code === 'invalid-input' &&
            err.title === 'Invalid setting bucket.prefix',
        );
      }
    });

    it('refuses keys neither backend can hold, on every operation', async () => {
      const store = await open();
      const bad = [
        '',
        '/a',
        'a/',
        'a//b',
        './a',
        'a/./b',
        'a/../b',
        '..',
        'a\nb',
        'a\u0000b',
        'x'.repeat(1_025),
      ];
      for (const key of bad) {
        for (const run of [
          () => store.get(key),
          () => store.put(key, 'x'),
          () => store.put(key, 'x', { ifNoneMatch: '*' }),
          () => store.delete(key),
          () => store.stat(key),
        ]) {
          await assert.rejects(run(), (err: unknown) => {
            assert.ok(err instanceof Problem, `${JSON.stringify(key)}: ${err}`);
            assert.equal(err.code, 'invalid-input');
            assert.equal(err.status, 400);
            assert.equal(err.title, 'Invalid bucket key');
            return true;
          });
        }
      }
      // 1,024 bytes is the limit, not past it; nothing was written by the refusals.
      await store.put('y'.repeat(200), 'fits');
      assert.deepEqual(
        (await store.list('', { recursive: true })).objects.map((o) => o.key),
        ['y'.repeat(200)],
      );
      await assert.rejects(
        store.put('k', 'x', { ifMatch: '"e"', ifNoneMatch: '*' }),
        /Invalid write condition/,
      );
    });

    it('updateJson: creates, replaces, deletes and leaves alone, each on the ETag it read', async () => {
      const store = await open();
      const key = 'u/counter.json';
      const created = await updateJson<{ n: number }>(store, key, (current) => {
        assert.equal(current, null);
        return { put: { n: 1 } };
      });
      assert.deepEqual(created, { value: { n: 1 }, etag: created.etag, changed: true, created: true });
      assert.equal((await store.stat(key))!.etag, created.etag);
      const replaced = await updateJson<{ n: number }>(store, key, (current) => ({
        put: { n: current!.value.n + 1 },
      }));
      assert.deepEqual([replaced.value, replaced.changed, replaced.created], [{ n: 2 }, true, false]);
      assert.notEqual(replaced.etag, created.etag);
      const kept = await updateJson<{ n: number }>(store, key, () => null);
      assert.deepEqual(kept, { value: { n: 2 }, etag: replaced.etag, changed: false, created: false });
      const deleted = await updateJson(store, key, () => ({ delete: true }));
      assert.deepEqual(deleted, { value: null, etag: null, changed: true, created: false });
      assert.equal(await store.get(key), null);
      const absent = await updateJson(store, key, () => ({ delete: true }));
      assert.deepEqual(absent, { value: null, etag: null, changed: false, created: false });
    });

    it('updateJson: concurrent updates all land, none lost, each retried on the race it lost', async () => {
      const store = await open();
      const key = 'u/concurrent.json';
      const writers = 8;
      let calls = 0;
      await Promise.all(
        Array.from({ length: writers }, (_, i) =>
          updateJson<string[]>(store, key, (current) => {
            calls++;
            return { put: [...(current?.value ?? []), `w${i}`] };
          }),
        ),
      );
      const stored = JSON.parse(text((await store.get(key))!.body)) as string[];
      assert.deepEqual(
        [...stored].sort(),
        Array.from({ length: writers }, (_, i) => `w${i}`),
      );
      assert.ok(calls > writers, `${calls} change calls for ${writers} writers: no race was retried`);
    });

    it(`updateJson: a write landing between read and write is read again; ${UPDATE_TRIES} losses are Registry is busy`, async () => {
      const store = await open();
      const key = 'u/contended.json';
      await store.put(key, JSON.stringify({ n: 0 }));
      // Another writer lands right after each of the first two reads.
      const twice = interfering(store, key, 2);
      const seen: number[] = [];
      const updated = await updateJson<{ n: number }>(twice, key, (current) => {
        seen.push(current!.value.n);
        return { put: { n: current!.value.n + 10 } };
      });
      assert.deepEqual(seen, [0, 1, 2]);
      assert.deepEqual(updated.value, { n: 12 });
      assert.deepEqual(JSON.parse(text((await store.get(key))!.body)), { n: 12 });

      let tries = 0;
      await assert.rejects(
        updateJson<{ n: number }>(interfering(store, key, Number.POSITIVE_INFINITY), key, (current) => {
          tries++;
          return { put: { n: current!.value.n } };
        }),
        (err: unknown) => {
          assert.ok(err instanceof Problem, String(err));
          assert.equal(err.code, 'store-unavailable');
          assert.equal(err.status, 503);
          assert.equal(err.title, 'Registry is busy');
          assert.match(err.detail ?? '', new RegExp(`${UPDATE_TRIES} conditional writes to ${key}`));
          return true;
        },
      );
      assert.equal(tries, UPDATE_TRIES);
      // A conditional delete loses the same way and is retried the same way.
      const deleted = await updateJson(interfering(store, key, 1), key, () => ({ delete: true }));
      assert.equal(deleted.changed, true);
      assert.equal(await store.get(key), null);
    });

    it(`${RACERS} processes racing on one key: exactly one wins each of ${ROUNDS} rounds`, async () => {
      const options = await backend.fresh();
      const key = '_svc/fleet/coordinator.json';
      const racers = await Promise.all(
        Array.from({ length: RACERS }, (_, id) => startRacer(options, key, id)),
      );
      try {
        const store = await open(options);
        for (let round = 0; round < ROUNDS; round++) {
          const seen = await Promise.all(racers.map((racer) => racer.ask({ cmd: 'read' })));
          const current = (await store.stat(key))?.etag ?? null;
          assert.deepEqual(
            seen.map((s) => s.etag),
            racers.map(() => current),
          );
          const answers = await Promise.all(racers.map((racer) => racer.ask({ cmd: 'write', round })));
          const winners = answers.flatMap((answer, id) => (answer.won ? [{ id, etag: answer.etag }] : []));
          assert.equal(winners.length, 1, `round ${round}: ${JSON.stringify(answers)}`);
          const stored = await store.get(key);
          assert.equal(text(stored!.body), `${winners[0]!.id}:${round}`);
          assert.equal(stored!.etag, winners[0]!.etag);
        }
      } finally {
        await Promise.all(racers.map((racer) => racer.stop()));
      }
    });
  });
}

interface Racer {
  ask(message: { cmd: string; round?: number }): Promise<{ etag?: string | null; won?: boolean }>;
  stop(): Promise<void>;
}

async function startRacer(options: OpenStoreOptions, key: string, id: number): Promise<Racer> {
  const child: ChildProcess = fork(RACER, [JSON.stringify({ options, key, id })], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit');
  const next = async () => {
    const [message] = (await Promise.race([
      once(child, 'message'),
      exited.then(([code]) => Promise.reject(new Error(`racer ${id} exited with ${code}`))),
    ])) as [{ error?: string; etag?: string | null; won?: boolean }];
    if (message.error) throw new Error(`racer ${id}: ${message.error}`);
    return message;
  };
  await next(); // ready
  return {
    ask(message) {
      const answer = next();
      child.send(message);
      return answer;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (child.connected) child.send({ cmd: 'exit' });
      else child.kill();
      await exited;
    },
  };
}

/** Asserts one write of a race won and every other lost with a CasConflict; answers the winner's ETag. */
function assertOneWinner(outcomes: PromiseSettledResult<string>[]): string {
  const won = outcomes.filter((o) => o.status === 'fulfilled');
  const lost = outcomes.filter((o) => o.status === 'rejected');
  assert.equal(won.length, 1, `winners: ${won.length}`);
  for (const loser of lost) assert.ok(loser.reason instanceof CasConflict, String(loser.reason));
  return (won[0] as PromiseFulfilledResult<string>).value;
}

/**
 * The store as seen by a writer that always loses its first `times` races on `key`: right after
 * each of those reads, another writer replaces the object (with a body counting the
 * interferences), so the ETag just read is stale.
 */
function interfering(store: Store, key: string, times: number): Store {
  let done = 0;
  return {
    description: store.description,
    async get(read) {
      const object = await store.get(read);
      if (read === key && object && done < times) {
        done++;
        await store.put(key, JSON.stringify({ n: done }));
      }
      return object;
    },
    put: (...args) => store.put(...args),
    delete: (...args) => store.delete(...args),
    list: (...args) => store.list(...args),
    stat: (...args) => store.stat(...args),
    close: () => store.close(),
  };
}

function isConflictOn(key: string) {
  return (err: unknown) => {
    assert.ok(err instanceof CasConflict, String(err));
    assert.equal(err.key, key);
    return true;
  };
}

function text(body: Uint8Array): string {
  return new TextDecoder().decode(body);
}

async function eachLimited<T>(items: T[], limit: number, run: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await run(items[next++]!);
  };
  await Promise.all(Array.from({ length: limit }, worker));
}
