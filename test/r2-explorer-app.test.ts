// The R2 binding under a real third-party app (docs/deploys.md "Cloudflare's KV and R2 templates"):
// an app of our own under test/fixtures/r2-explorer-app/ on the `r2-explorer` package (Hono and
// chanfana; the file manager Cloudflare's r2-explorer template deploys), set up as its
// documentation says, its prebuilt dashboard served as assets straight from
// `node_modules/r2-explorer/dashboard`. It is installed from the npm registry with its lockfile,
// without building it (svc deploy bundles it, as wrangler deploy would), into a cache under
// `.tools/framework-builds/` (helpers/framework-build.ts), deployed with `svc deploy` to a real
// `svc sail` running the real runtime on real MinIO, and driven with the requests its dashboard
// makes. Read-only (`--env readonly`, the entry `src/readonly.ts`): dashboard, bucket found, a
// write refused. Writable (`src/index.ts`): uploads (single and multipart), folders, listings,
// head, download, a share link, and deletes leaving no record in MinIO.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson, type Store } from '../src/store/store.ts';
import { keyArg } from './helpers/applications.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { frameworkBuildDir, installFrameworkProject } from './helpers/framework-build.ts';
import { type Signer, signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import { type RunResult, runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const FIXTURE = resolve(import.meta.dirname, 'fixtures', 'r2-explorer-app');
const SERVE_DEADLINE_MS = 60_000;
/** The app's bucket binding, which r2-explorer names the bucket by in its API paths. */
const BINDING = 'files';
/** The binding's `bucket_name`, under which svc keeps the bucket in MinIO. */
const BUCKET_NAME = 'explorer-files';

/** The fixture's files, by path relative to its folder. */
function fixtureFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const entry of readdirSync(FIXTURE, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(FIXTURE, path)] = readFileSync(path, 'utf8');
  }
  return files;
}

const FILES = fixtureFiles();
const APP_DIR = frameworkBuildDir('r2-explorer-app', FILES);

// At the top level, so MinIO lives until the file ends.
const minioStarting = useMinio();

let store: Store | undefined;
let node: SailProcess | undefined;
let admin: Signer;
let installProblem: string | null = null;
const home = tempDir('svc-home-');

before(async () => {
  installProblem = installFrameworkProject(APP_DIR, FILES, ['--omit=dev']);
  if (installProblem) return;
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  admin = await trustOperator(store, signerFor('op-admin'), 'admin', ['*']);
  node = await startSail([
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
});
after(async () => {
  await node?.stop();
  await store?.close();
});

/** `svc deploy` of the installed app with the admin key, `--env <env>` when given. */
function deploy(env?: string): Promise<RunResult> {
  return runSvc(
    [
      'deploy',
      APP_DIR,
      ...(env ? ['--env', env] : []),
      '--node',
      (node as SailProcess).url,
      '--key',
      keyArg(admin),
    ],
    {
      env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
      timeoutMs: 180_000,
    },
  );
}

/** The base URL of the application's ready process on the node, once there is one. */
async function baseOf(application: string): Promise<string> {
  const port = await waitFor(
    async () => {
      const record = await getJson<NodeRecord>(store as Store, keys.nodeRecord((node as SailProcess).nodeId));
      return (
        (record?.value.processes ?? []).find((p) => p.application === application && p.ready)?.port ?? null
      );
    },
    () => `${application} to be ready\n${node?.log().slice(-3000)}`,
    SERVE_DEADLINE_MS,
  );
  return `http://127.0.0.1:${port}`;
}

/** r2-explorer's API at `base`, as its dashboard calls it (keys travel base64-encoded). */
function explorerApi(base: string) {
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
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
  /** The dashboard's listing call: one level under `prefix`, with both kinds of metadata. */
  const listing = async (prefix = '') => {
    const query = new URLSearchParams({
      include: 'customMetadata',
      delimiter: '/',
      prefix: prefix && b64(prefix),
    });
    query.append('include', 'httpMetadata');
    const answer = await api(`/buckets/${BINDING}?${query}`);
    assert.equal(answer.status, 200, answer.text);
    return answer.json as {
      objects: { key: string; size: number; httpMetadata?: { contentType?: string } }[];
      delimitedPrefixes: string[];
      truncated: boolean;
    };
  };
  /** The dashboard's upload call: the file's bytes as the body, its key and type in the query. */
  const upload = (key: string, body: string, contentType: string) =>
    api(
      `/buckets/${BINDING}/upload?${new URLSearchParams({ key: b64(key), httpMetadata: b64(JSON.stringify({ contentType })) })}`,
      { method: 'POST', body, headers: { 'content-type': 'multipart/form-data' } },
    );
  /** The URL of an object's download (and, with a suffix, of its other routes). */
  const objectUrl = (key: string, suffix = '') =>
    `${base}/api/buckets/${BINDING}/${encodeURIComponent(b64(key))}${suffix}`;
  return { b64, api, listing, upload, objectUrl };
}

describe('r2-explorer (npm package 1.1.13) over an R2 binding', () => {
  it('read-only: serves its dashboard from node_modules, finds its bucket binding, lists, and refuses a write with 401, code 10005', async () => {
    assert.equal(installProblem, null, 'the app installs from the npm registry');
    const deployed = await deploy('readonly');
    assert.equal(deployed.code, 0, deployed.stderr);
    const base = await baseOf('r2-explorer-app-readonly');
    const { api, listing, upload } = explorerApi(base);

    const dashboard = await fetch(`${base}/`, { headers: { 'sec-fetch-mode': 'navigate' } });
    assert.equal(dashboard.status, 200);
    const index = await dashboard.text();
    assert.match(index, /<title>R2-Explorer<\/title>/);
    const script = /src="?(\/assets\/[\w.-]+\.js)/.exec(index)?.[1];
    assert.ok(script, 'the dashboard loads its scripts from /assets/');
    const chunk = await fetch(`${base}${script}`);
    assert.equal(chunk.status, 200, script);
    assert.match(chunk.headers.get('content-type') ?? '', /javascript/);
    const deepLink = await fetch(`${base}/storage/${BINDING}/some/folder`, {
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
      [{ name: BINDING }],
      'the binding is an R2Bucket, as the explorer finds buckets',
    );
    assert.deepEqual(await listing(), { objects: [], delimitedPrefixes: [], truncated: false });

    const refused = await upload('a.txt', 'no', 'text/plain');
    assert.equal(refused.status, 401, refused.text);
    const error = (refused.json as { success: boolean; errors: { code: number; message: string }[] })
      .errors[0];
    assert.equal(error?.code, 10005);
    assert.match(error?.message ?? '', /read.?only/i, refused.text);
    assert.deepEqual(await listing(), { objects: [], delimitedPrefixes: [], truncated: false });
  });

  it('writable: upload, folders, list, head, download, multipart upload, share link, delete', async () => {
    assert.equal(installProblem, null, 'the app installs from the npm registry');
    const deployed = await deploy();
    assert.equal(deployed.code, 0, deployed.stderr);
    const base = await baseOf('r2-explorer-app');
    const { b64, api, listing, upload, objectUrl } = explorerApi(base);
    const config = await api('/server/config');
    assert.equal((config.json as { config: { readonly: boolean } }).config.readonly, false, config.text);

    const uploaded = await upload('hello.txt', 'héllo, R2', 'text/plain');
    assert.equal(uploaded.status, 200, uploaded.text);
    assert.equal((uploaded.json as { key: string; size: number }).size, Buffer.byteLength('héllo, R2'));
    assert.equal((await api(`/buckets/${BINDING}/folder`, jsonPost({ key: b64('docs/') }))).status, 200);
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

    const head = await api(`/buckets/${BINDING}/${encodeURIComponent(b64('hello.txt'))}/head`);
    assert.equal(head.status, 200, head.text);
    assert.equal((head.json as { etag: string }).etag, md5('héllo, R2'));
    const download = await fetch(objectUrl('docs/read me.md'));
    assert.equal(download.status, 200);
    assert.equal(download.headers.get('content-type'), 'text/markdown');
    assert.equal(download.headers.get('content-disposition'), 'attachment; filename="read me.md"');
    assert.equal(await download.text(), '# hi');

    // A large file goes up as the dashboard sends one: create, parts of 5 MiB and the rest, complete.
    const big = Buffer.alloc(5 * 1024 * 1024 + 3, 'x');
    big.write('end', big.length - 3);
    const create = await api(
      `/buckets/${BINDING}/multipart/create?${new URLSearchParams({ key: b64('big.bin'), httpMetadata: b64(JSON.stringify({ contentType: 'application/octet-stream' })) })}`,
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
      const part = await api(`/buckets/${BINDING}/multipart/upload?${query}`, {
        method: 'POST',
        body: chunk,
        headers: { 'content-type': 'multipart/form-data' },
      });
      assert.equal(part.status, 200, part.text);
      parts.push(part.json);
    }
    const complete = await api(
      `/buckets/${BINDING}/multipart/complete`,
      jsonPost({ key: b64('big.bin'), uploadId, parts }),
    );
    assert.equal(complete.status, 200, complete.text);
    const bigBack = await fetch(objectUrl('big.bin'));
    assert.equal(bigBack.status, 200);
    assert.equal(md5(Buffer.from(await bigBack.arrayBuffer())), md5(big));

    // A share link with one download: its record is read and written back through the binding.
    const shared = await api(
      `/buckets/${BINDING}/${encodeURIComponent(b64('hello.txt'))}/share`,
      jsonPost({ maxDownloads: 1 }),
    );
    assert.equal(shared.status, 200, shared.text);
    const { shareId, shareUrl } = shared.json as { shareId: string; shareUrl: string };
    assert.equal(shareUrl, `${base}/share/${shareId}`);
    const once = await fetch(shareUrl);
    assert.equal(once.status, 200);
    assert.equal(await once.text(), 'héllo, R2');
    assert.equal((await fetch(shareUrl)).status, 403, 'the download limit, counted in the share record');
    assert.equal((await api(`/buckets/${BINDING}/share/${shareId}`, { method: 'DELETE' })).status, 200);

    for (const key of ['hello.txt', 'big.bin', 'docs/read me.md', 'docs/']) {
      const deleted = await api(`/buckets/${BINDING}/delete`, jsonPost({ key: b64(key) }));
      assert.equal(deleted.status, 200, deleted.text);
    }
    assert.deepEqual(await listing(), { objects: [], delimitedPrefixes: [], truncated: false });
    assert.equal((await fetch(objectUrl('hello.txt'))).status, 404);
    const records = await (store as Store).list(keys.runtimeR2RecordsPrefix('r2-explorer-app', BUCKET_NAME), {
      recursive: true,
    });
    assert.deepEqual(records.objects, [], 'no record is left in MinIO');
  });
});

function jsonPost(body: unknown): RequestInit {
  return { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
}

function md5(data: string | Buffer): string {
  return createHash('md5').update(data).digest('hex');
}
