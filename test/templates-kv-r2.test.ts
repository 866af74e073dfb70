// Cloudflare's own KV and R2 templates on svc (docs/bindings.md "KV namespaces" and "R2 buckets"):
// `to-do-list-kv-template` (Remix on Workers, a to-do list kept in KV) and `r2-explorer-template`
// (the r2-explorer package's file manager over an R2 bucket), vendored unchanged under
// test/fixtures/cloudflare-templates/ (its README says from which commit). Each is installed from
// the npm registry with its own lockfile into a cache under `.tools/framework-builds/`
// (helpers/framework-build.ts), built with its own toolchain where it has one (`remix vite:build`),
// deployed with `svc deploy` to a real `svc sail` running the real runtime on real MinIO, and
// driven through real requests as its UI makes them: to-do items created, toggled, listed and
// deleted; objects uploaded (single and multipart), listed, downloaded and deleted.
//
// Their binding ids need no change: the to-do list's KV id is 32 hex characters, an id svc accepts
// as it is, and r2-explorer's bucket_name is a valid R2 name. One thing the test changes, and why:
// r2-explorer's pinned `r2-explorer` 1.1.10 is not on the registry these machines reach, so the
// install takes 1.1.13, the nearest later release of the same line (same API routes).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson, type Store } from '../src/store/store.ts';
import { keyArg } from './helpers/applications.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import {
  buildFrameworkProject,
  frameworkBuildDir,
  installFrameworkProject,
} from './helpers/framework-build.ts';
import { type Signer, signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import { type RunResult, runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const TEMPLATES = resolve(import.meta.dirname, 'fixtures', 'cloudflare-templates');
const SERVE_DEADLINE_MS = 60_000;

/** A vendored template's files, by path relative to its folder. */
function templateFiles(name: string): Record<string, string> {
  const root = join(TEMPLATES, name);
  const files: Record<string, string> = {};
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(root, path)] = readFileSync(path, 'utf8');
  }
  return files;
}

const TODO_FILES = templateFiles('to-do-list-kv-template');
const R2_FILES = templateFiles('r2-explorer-template');
R2_FILES['package.json'] = R2_FILES['package.json']!.replace(
  '"r2-explorer": "1.1.10"',
  '"r2-explorer": "1.1.13"',
);
const TODO_DIR = frameworkBuildDir('to-do-list-kv-template', TODO_FILES);
const R2_DIR = frameworkBuildDir('r2-explorer-template', R2_FILES);

// At the top level, so MinIO lives until the file ends.
const minioStarting = useMinio();

/** One real node on a fresh MinIO bucket, and an admin key to deploy with. */
interface MinioNode {
  store: Store;
  node: SailProcess;
  deploy(dir: string): Promise<RunResult>;
  /** The ports of the application's ready processes on the node, once there is one. */
  portsOf(application: string): Promise<number[]>;
}

async function startMinioNode(): Promise<MinioNode> {
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  const store = await openStore({ ...options, stateDir: tempDir() });
  const admin: Signer = await trustOperator(store, signerFor('op-admin'), 'admin', ['*']);
  const node = await startSail([
    '--endpoint',
    options.endpoint,
    '--region',
    options.region,
    '--bucket',
    options.bucket,
    '--access-key',
    options.accessKey,
    '--secret-key',
    options.secretKey,
    '--cell-bin',
    CELL_REAL,
  ]);
  const home = tempDir('svc-home-');
  return {
    store,
    node,
    deploy: (dir) =>
      runSvc(['deploy', dir, '--node', node.url, '--key', keyArg(admin)], {
        env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
        timeoutMs: 180_000,
      }),
    portsOf: (application) =>
      waitFor(
        async () => {
          const record = await getJson<NodeRecord>(store, keys.nodeRecord(node.nodeId));
          const ports = (record?.value.processes ?? [])
            .filter((p) => p.application === application && p.ready)
            .map((p) => p.port);
          return ports.length > 0 ? ports : null;
        },
        `${application} to be ready\n${node.log().slice(-3000)}`,
        SERVE_DEADLINE_MS,
      ) as Promise<number[]>,
  };
}

let target: MinioNode | undefined;
let installProblem: string | null = null;

before(async () => {
  installProblem =
    installFrameworkProject(TODO_DIR, TODO_FILES) ??
    // svc deploy bundles r2-explorer itself, as wrangler deploy would: the template's wrangler is not needed.
    installFrameworkProject(R2_DIR, R2_FILES, ['--omit=dev']);
  if (installProblem) return;
  target = await startMinioNode();
});
after(async () => {
  await target?.node.stop();
  await target?.store.close();
});

describe("Cloudflare's to-do-list-kv-template", () => {
  it('builds with remix vite:build, deploys unchanged, and keeps each list in KV: create, toggle, list, delete', async () => {
    assert.equal(installProblem, null, 'the templates install from the registry');
    const build = buildFrameworkProject(TODO_DIR, ['build']);
    assert.equal(build.status, 0, build.output);
    const node = target as MinioNode;
    const deployed = await node.deploy(TODO_DIR);
    assert.equal(deployed.code, 0, deployed.stderr);
    const [port] = await node.portsOf('to-do-list-kv-template');
    const base = `http://127.0.0.1:${port}`;
    const page = async (path: string) => {
      const response = await fetch(`${base}${path}`);
      return { status: response.status, body: await response.text() };
    };
    /** A form as the page's own `<form method="post">` sends it (a document POST). */
    const submit = async (path: string, fields: Record<string, string>) => {
      const response = await fetch(`${base}${path}`, {
        method: 'POST',
        body: new URLSearchParams(fields),
        redirect: 'manual',
      });
      return { status: response.status, body: await response.text() };
    };
    /** The list's items as the page shows them: one `<li>` each, its toggle form first. */
    const items = (html: string) =>
      html
        .split('<li ')
        .slice(1)
        .map((li) => {
          const match = /name="id" value="([^"]+)".*?<span class="([^"]*)">([^<]*)<\/span>/.exec(li);
          assert.ok(match, li);
          return {
            id: match[1] as string,
            done: match[2] === 'line-through text-gray-400',
            text: match[3] as string,
          };
        });

    const home = await fetch(`${base}/`, { redirect: 'manual' });
    assert.equal(home.status, 302, 'the index route redirects to a new list');
    assert.match(home.headers.get('location') ?? '', /^\/[\w-]{21}$/, 'a nanoid names the list');

    const list = '/groceries';
    const empty = await page(list);
    assert.equal(empty.status, 200, empty.body);
    assert.match(empty.body, /<h1[^>]*>Todo List<\/h1>/);
    assert.deepEqual(items(empty.body), []);
    const css = /href="(\/assets\/[\w.-]+\.css)"/.exec(empty.body)?.[1];
    assert.ok(css, 'the page links its Tailwind stylesheet');
    assert.equal((await fetch(`${base}${css}`)).status, 200);

    for (const text of ['Buy milk', 'Bake bread']) {
      const created = await submit(list, { intent: 'create', text });
      assert.equal(created.status, 200, created.body);
    }
    const two = items((await page(list)).body);
    assert.deepEqual(
      two.map((item) => [item.text, item.done]),
      [
        ['Bake bread', false],
        ['Buy milk', false],
      ],
      'newest first, as TodoManager.list sorts them',
    );
    const milk = two.find((item) => item.text === 'Buy milk')!;

    assert.equal((await submit(list, { intent: 'toggle', id: milk.id })).status, 200);
    assert.deepEqual(
      items((await page(list)).body).map((item) => [item.text, item.done]),
      [
        ['Bake bread', false],
        ['Buy milk', true],
      ],
    );
    // The hydrated page submits through single fetch: `<path>.data`, answered as turbo-stream.
    const viaData = await fetch(`${base}${list}.data`, {
      method: 'POST',
      body: new URLSearchParams({ intent: 'delete', id: milk.id }),
    });
    assert.equal(viaData.status, 200, await viaData.text());
    assert.deepEqual(
      items((await page(list)).body).map((item) => item.text),
      ['Bake bread'],
    );
    assert.deepEqual(items((await page('/another-list')).body), [], 'each list is its own KV key');

    const invalid = await submit(list, { intent: 'create', text: '' });
    assert.equal(invalid.status, 400, "the template's own refusal of an empty item");

    // The list is one KV key, named after the list, kept in MinIO under the application.
    const stored = await node.store.list(
      keys.runtimeKvNamespacePrefix('to-do-list-kv-template', 'cf8aa41453dc4be09ff86530895773e1'),
      { recursive: true },
    );
    assert.equal(stored.objects.length, 1, JSON.stringify(stored.objects.map((o) => o.key)));
  });
});

describe("Cloudflare's r2-explorer-template", () => {
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  let base = '';
  const api = async (path: string, init: RequestInit = {}) => {
    const response = await fetch(`${base}/api${path}`, init);
    const text = await response.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json };
  };
  /** The dashboard's listing call (apiHandler.listObjects). */
  const listing = async (prefix = '') => {
    const query = new URLSearchParams({
      include: 'customMetadata',
      delimiter: '/',
      prefix: prefix && b64(prefix),
    });
    query.append('include', 'httpMetadata');
    const answer = await api(`/buckets/bucket?${query}`);
    assert.equal(answer.status, 200, answer.text);
    const body = answer.json as {
      objects: { key: string; size: number; httpMetadata?: { contentType?: string } }[];
      delimitedPrefixes: string[];
      truncated: boolean;
    };
    return body;
  };
  /** The dashboard's upload call (apiHandler.uploadObjects): the file's bytes, key and type in the query. */
  const upload = (key: string, body: string, contentType: string) =>
    api(
      `/buckets/bucket/upload?${new URLSearchParams({ key: b64(key), httpMetadata: b64(JSON.stringify({ contentType })) })}`,
      {
        method: 'POST',
        body,
        headers: { 'content-type': 'multipart/form-data' },
      },
    );

  it('deploys unchanged: serves its dashboard, sees its bucket binding, lists, and refuses writes as its readonly mode does', async () => {
    assert.equal(installProblem, null, 'the templates install from the registry');
    const node = target as MinioNode;
    // The installed copy is shared by runs; the next test edits it, so this one restores it first.
    writeFileSync(join(R2_DIR, 'src', 'index.ts'), R2_FILES['src/index.ts']!);
    const deployed = await node.deploy(R2_DIR);
    assert.equal(deployed.code, 0, deployed.stderr);
    assert.match(deployed.stderr, /ignoring "r2_buckets\[0\]\.preview_bucket_name"/);
    base = `http://127.0.0.1:${(await node.portsOf('r2-explorer-template'))[0]}`;

    const dashboard = await fetch(`${base}/`, { headers: { 'sec-fetch-mode': 'navigate' } });
    assert.equal(dashboard.status, 200);
    const index = await dashboard.text();
    assert.match(index, /<title>R2-Explorer<\/title>/);
    const script = /src="?(\/assets\/[\w.-]+\.js)/.exec(index)?.[1];
    assert.ok(script, 'the dashboard loads its scripts from /assets/');
    const chunk = await fetch(`${base}${script}`);
    assert.equal(chunk.status, 200, script);
    assert.match(chunk.headers.get('content-type') ?? '', /javascript/);
    const deepLink = await fetch(`${base}/storage/bucket/some/folder`, {
      headers: { 'sec-fetch-mode': 'navigate' },
    });
    assert.equal(deepLink.status, 200, "a deep link gets the app's index.html (single-page-application)");
    assert.equal(await deepLink.text(), index);

    const config = await api('/server/config');
    assert.equal(config.status, 200, config.text);
    const info = config.json as { config: { readonly: boolean }; buckets: { name: string }[] };
    assert.equal(info.config.readonly, true);
    assert.deepEqual(
      info.buckets,
      [{ name: 'bucket' }],
      'the binding is an R2Bucket, as the explorer finds buckets',
    );
    assert.deepEqual(await listing(), { objects: [], delimitedPrefixes: [], truncated: false });

    const refused = await upload('a.txt', 'no', 'text/plain');
    assert.equal(refused.status, 401);
    assert.equal((refused.json as { errors: { code: number }[] }).errors[0]!.code, 10005);
  });

  it('with editing on, as its README says: upload, folders, list, head, download, multipart upload, share link, delete', async () => {
    const node = target as MinioNode;
    // The README's next step: `readonly: false` in src/index.ts; everything else as installed.
    const writable = R2_FILES['src/index.ts']!.replace('readonly: true', 'readonly: false');
    assert.notEqual(writable, R2_FILES['src/index.ts']);
    writeFileSync(join(R2_DIR, 'src', 'index.ts'), writable);
    const deployed = await node.deploy(R2_DIR);
    assert.equal(deployed.code, 0, deployed.stderr);
    // The new deployment's process, once the old one has drained away.
    await waitFor(
      async () => {
        const ports = await node.portsOf('r2-explorer-template');
        if (ports.length !== 1) return false;
        base = `http://127.0.0.1:${ports[0]}`;
        const config = await api('/server/config').catch(() => undefined);
        return (config?.json as { config?: { readonly: boolean } } | undefined)?.config?.readonly === false;
      },
      'the writable deployment to serve alone',
      SERVE_DEADLINE_MS,
    );

    const uploaded = await upload('hello.txt', 'héllo, R2', 'text/plain');
    assert.equal(uploaded.status, 200, uploaded.text);
    assert.equal((uploaded.json as { key: string; size: number }).size, Buffer.byteLength('héllo, R2'));
    assert.equal((await api('/buckets/bucket/folder', jsonPost({ key: b64('docs/') }))).status, 200);
    assert.equal((await upload('docs/read me.md', '# hi', 'text/markdown')).status, 200);

    const top = await listing();
    assert.deepEqual(
      top.objects.map((o) => [o.key, o.size, o.httpMetadata?.contentType]),
      [['hello.txt', 10, 'text/plain']],
    );
    assert.deepEqual(top.delimitedPrefixes, ['docs/']);
    assert.deepEqual(
      (await listing('docs/')).objects.map((o) => o.key),
      ['docs/', 'docs/read me.md'],
    );

    const head = await api(`/buckets/bucket/${encodeURIComponent(b64('hello.txt'))}/head`);
    assert.equal(head.status, 200, head.text);
    assert.equal((head.json as { etag: string }).etag, md5('héllo, R2'));
    const download = await fetch(`${base}/api/buckets/bucket/${encodeURIComponent(b64('docs/read me.md'))}`);
    assert.equal(download.status, 200);
    assert.equal(download.headers.get('content-type'), 'text/markdown');
    assert.equal(download.headers.get('content-disposition'), 'attachment; filename="read me.md"');
    assert.equal(await download.text(), '# hi');

    // A large file goes up as the dashboard sends one: create, parts of 5 MiB and the rest, complete.
    const big = Buffer.alloc(5 * 1024 * 1024 + 3, 'x');
    big.write('end', big.length - 3);
    const create = await api(
      `/buckets/bucket/multipart/create?${new URLSearchParams({ key: b64('big.bin'), httpMetadata: b64(JSON.stringify({ contentType: 'application/octet-stream' })) })}`,
      { method: 'POST' },
    );
    assert.equal(create.status, 200, create.text);
    const uploadId = (create.json as { uploadId: string }).uploadId;
    const parts: unknown[] = [];
    for (const [index, chunk] of [
      big.subarray(0, 5 * 1024 * 1024),
      big.subarray(5 * 1024 * 1024),
    ].entries()) {
      const query = new URLSearchParams({ key: b64('big.bin'), uploadId, partNumber: String(index + 1) });
      const part = await api(`/buckets/bucket/multipart/upload?${query}`, {
        method: 'POST',
        body: chunk,
        headers: { 'content-type': 'multipart/form-data' },
      });
      assert.equal(part.status, 200, part.text);
      parts.push(part.json);
    }
    const complete = await api(
      '/buckets/bucket/multipart/complete',
      jsonPost({ key: b64('big.bin'), uploadId, parts }),
    );
    assert.equal(complete.status, 200, complete.text);
    const bigBack = await fetch(`${base}/api/buckets/bucket/${encodeURIComponent(b64('big.bin'))}`);
    assert.equal(bigBack.status, 200);
    assert.equal(md5(Buffer.from(await bigBack.arrayBuffer())), md5(big));

    // A share link with one download: its record is read and written back through the binding.
    const shared = await api(
      `/buckets/bucket/${encodeURIComponent(b64('hello.txt'))}/share`,
      jsonPost({ maxDownloads: 1 }),
    );
    assert.equal(shared.status, 200, shared.text);
    const { shareId, shareUrl } = shared.json as { shareId: string; shareUrl: string };
    assert.equal(shareUrl, `${base}/share/${shareId}`);
    const once = await fetch(shareUrl);
    assert.equal(once.status, 200);
    assert.equal(await once.text(), 'héllo, R2');
    assert.equal((await fetch(shareUrl)).status, 403, 'the download limit, counted in the share record');
    assert.equal((await api(`/buckets/bucket/share/${shareId}`, { method: 'DELETE' })).status, 200);

    for (const key of ['hello.txt', 'big.bin', 'docs/read me.md', 'docs/']) {
      const deleted = await api('/buckets/bucket/delete', jsonPost({ key: b64(key) }));
      assert.equal(deleted.status, 200, deleted.text);
    }
    assert.deepEqual(await listing(), { objects: [], delimitedPrefixes: [], truncated: false });
    const gone = await fetch(`${base}/api/buckets/bucket/${encodeURIComponent(b64('hello.txt'))}`);
    assert.equal(gone.status, 404);
    const records = await node.store.list(
      keys.runtimeR2RecordsPrefix('r2-explorer-template', 'r2-explorer-bucket'),
      {
        recursive: true,
      },
    );
    assert.deepEqual(records.objects, [], 'no record is left in MinIO');
  });
});

function jsonPost(body: unknown): RequestInit {
  return { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
}

function md5(data: string | Buffer): string {
  return createHash('md5').update(data).digest('hex');
}
