// The KV and R2 example projects (examples/kv-shortlinks, examples/r2-files; docs/bindings.md "KV
// namespaces" and "R2 buckets") deployed with `svc deploy` to a real `svc sail` running the real
// runtime, and used as their READMEs say.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { EXAMPLES } from './helpers/cell.ts';
import { type DeployNode, startDeployNode } from './helpers/deploy-node.ts';

let target: DeployNode;
before(async () => {
  target = await startDeployNode();
});
after(async () => {
  await target?.stop();
});

async function deployed(example: string): Promise<string> {
  const run = await target.deploy(join(EXAMPLES, example));
  assert.equal(run.code, 0, run.stderr);
  return `http://127.0.0.1:${await target.portOf(example)}`;
}

test('kv-shortlinks: a link is created, redirects, is listed with its expiry, and is deleted', async () => {
  const base = await deployed('kv-shortlinks');
  const create = (body: unknown) =>
    fetch(`${base}/links`, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });

  const refused = await create({ url: 'javascript:alert(1)' });
  assert.equal(refused.status, 400);
  assert.deepEqual(await refused.json(), { error: 'url must be an http or https URL' });
  assert.equal((await create({ url: 'https://example.com/', days: 0 })).status, 400);

  const before = Math.floor(Date.now() / 1000);
  const created = await create({ url: 'https://example.com/a/long/path?q=1', days: 7 });
  assert.equal(created.status, 201);
  const link = (await created.json()) as { code: string; url: string; short: string };
  assert.match(link.code, /^[a-zA-Z2-9]{7}$/);
  assert.equal(link.short, `${base}/${link.code}`);

  const followed = await fetch(`${base}/${link.code}`, { redirect: 'manual' });
  assert.equal(followed.status, 302);
  assert.equal(followed.headers.get('location'), 'https://example.com/a/long/path?q=1');

  const listed = (await (await fetch(`${base}/links`)).json()) as {
    code: string;
    expiration: number;
    created: number;
  }[];
  assert.equal(listed.length, 1);
  assert.equal(listed[0]!.code, link.code);
  const week = 7 * 24 * 60 * 60;
  assert.ok(
    listed[0]!.expiration >= before + week && listed[0]!.expiration <= before + week + 60,
    'expires in 7 days',
  );
  assert.ok(listed[0]!.created >= before * 1000, 'the creation time kept as metadata');

  assert.equal((await fetch(`${base}/links/${link.code}`, { method: 'DELETE' })).status, 204);
  assert.equal((await fetch(`${base}/${link.code}`, { redirect: 'manual' })).status, 404);
  assert.deepEqual(await (await fetch(`${base}/links`)).json(), []);
});

test('r2-files: a form upload and a PUT are listed, served with ranges and conditionals, and deleted', async () => {
  const base = await deployed('r2-files');
  const form = new FormData();
  form.append('file', new File(['hello, <R2>'], 'note <1>.txt', { type: 'text/plain' }));
  const uploaded = await fetch(`${base}/`, { method: 'POST', body: form, redirect: 'manual' });
  assert.equal(uploaded.status, 303);
  assert.equal((await fetch(`${base}/`, { method: 'POST', body: new FormData() })).status, 400);

  const put = await fetch(`${base}/files/data.json`, {
    method: 'PUT',
    body: '{"a":1}',
    headers: { 'content-type': 'application/json', 'cache-control': 'max-age=60' },
  });
  assert.equal(put.status, 201);
  assert.equal(((await put.json()) as { size: number }).size, 7);

  const index = await (await fetch(`${base}/`)).text();
  assert.match(index, /<a href="\/files\/data.json">data.json<\/a> 7 bytes, application\/json/);
  assert.match(index, /<a href="\/files\/note%20%3C1%3E.txt">note &lt;1&gt;.txt<\/a> 11 bytes, text\/plain/);

  const note = await fetch(`${base}/files/${encodeURIComponent('note <1>.txt')}`);
  assert.equal(note.status, 200);
  assert.equal(note.headers.get('content-type'), 'text/plain');
  assert.equal(await note.text(), 'hello, <R2>');
  const etag = note.headers.get('etag')!;
  assert.match(etag, /^"[0-9a-f]{32}"$/);

  const data = await fetch(`${base}/files/data.json`);
  assert.equal(data.headers.get('cache-control'), 'max-age=60', 'the PUT headers kept as the http metadata');
  const part = await fetch(`${base}/files/${encodeURIComponent('note <1>.txt')}`, {
    headers: { range: 'bytes=7-' },
  });
  assert.equal(part.status, 206);
  assert.equal(part.headers.get('content-range'), 'bytes 7-10/11');
  assert.equal(await part.text(), '<R2>');
  const unchanged = await fetch(`${base}/files/${encodeURIComponent('note <1>.txt')}`, {
    headers: { 'if-none-match': etag },
  });
  assert.equal(unchanged.status, 304);

  assert.equal((await fetch(`${base}/files/data.json`, { method: 'DELETE' })).status, 204);
  assert.equal((await fetch(`${base}/files/data.json`)).status, 404);
  assert.equal((await fetch(`${base}/files/data.json`, { method: 'POST' })).status, 405);
  assert.doesNotMatch(await (await fetch(`${base}/`)).text(), /data\.json/);
});
