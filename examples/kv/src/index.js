// A small key-value API over env.DATA, and /conformance: every KV method and limit, run inside
// workerd against the runtime host's KV service, each outcome reported as JSON for the test.

async function attempt(run) {
  try {
    return { ok: await run() };
  } catch (err) {
    return { error: `${err.name}: ${err.message}` };
  }
}

async function conformance(kv) {
  const r = {};
  r.missing = await attempt(() => kv.get('missing'));
  await kv.put('text', 'héllo');
  r.text = await attempt(() => kv.get('text'));
  r.textAsArrayBuffer = await attempt(async () => [...new Uint8Array(await kv.get('text', 'arrayBuffer'))]);
  r.textAsStream = await attempt(async () => new Response(await kv.get('text', { type: 'stream' })).text());
  await kv.put('bytes', new Uint8Array([0, 1, 2, 255]));
  r.bytes = await attempt(async () => [...new Uint8Array(await kv.get('bytes', 'arrayBuffer'))]);
  await kv.put('json', JSON.stringify({ a: [1, 2] }), { metadata: { by: 'ünïcode', n: 7 } });
  r.json = await attempt(() => kv.get('json', 'json'));
  r.withMetadata = await attempt(() => kv.getWithMetadata('json', 'json'));
  r.noMetadata = await attempt(() => kv.getWithMetadata('text'));
  r.emptyValue = await attempt(async () => {
    await kv.put('empty', '');
    return kv.get('empty');
  });
  r.overwrite = await attempt(async () => {
    await kv.put('text2', 'one');
    await kv.put('text2', 'two');
    return kv.get('text2');
  });
  r.deleted = await attempt(async () => {
    await kv.delete('text2');
    await kv.delete('never-there');
    return kv.get('text2');
  });
  const now = Math.floor(Date.now() / 1000);
  await kv.put('ttl', 'v', { expirationTtl: 3600 });
  await kv.put('abs', 'v', { expiration: now + 7200 });
  r.now = now;
  r.bulk = await attempt(async () => Object.fromEntries(await kv.get(['text', 'missing', 'json'])));
  r.bulkJsonWithMetadata = await attempt(async () =>
    Object.fromEntries(await kv.getWithMetadata(['json'], 'json')),
  );

  for (const key of ['b', 'a', 'ab', 'a/b', 'é', '\u{1F600}', 'z'.repeat(507)])
    await kv.put(`list:${key}`, key);
  r.listAll = await attempt(() => kv.list({ prefix: 'list:' }));
  r.listPrefixA = await attempt(() => kv.list({ prefix: 'list:a' }));
  r.listPages = await attempt(async () => {
    const pages = [];
    let cursor;
    do {
      const page = await kv.list({ prefix: 'list:', limit: 3, cursor });
      pages.push({ names: page.keys.map((k) => k.name), complete: page.list_complete });
      cursor = page.cursor;
      if (pages.length > 10) throw new Error('no end to the pages');
    } while (!pages.at(-1).complete);
    return pages;
  });
  r.listExpirationAndMetadata = await attempt(async () =>
    (await kv.list()).keys.filter((k) => ['json', 'ttl', 'abs'].includes(k.name)),
  );

  r.emptyKey = await attempt(() => kv.get(''));
  r.dotKey = await attempt(() => kv.put('.', 'v'));
  r.dotDotKey = await attempt(() => kv.delete('..'));
  r.longKey = await attempt(() => kv.get('k'.repeat(513)));
  r.longestKey = await attempt(() => kv.get('k'.repeat(512)));
  r.shortTtl = await attempt(() => kv.put('k', 'v', { expirationTtl: 30 }));
  r.pastExpiration = await attempt(() => kv.put('k', 'v', { expiration: now - 10 }));
  r.nearExpiration = await attempt(() => kv.put('k', 'v', { expiration: now + 30 }));
  r.bigMetadata = await attempt(() => kv.put('k', 'v', { metadata: { m: 'x'.repeat(1020) } }));
  r.bigValue = await attempt(() => kv.put('k', new Uint8Array(25 * 1024 * 1024 + 1)));
  r.largestValue = await attempt(async () => {
    await kv.put('large', new Uint8Array(25 * 1024 * 1024));
    return (await kv.get('large', 'arrayBuffer')).byteLength;
  });
  r.listLimitTooHigh = await attempt(() => kv.list({ limit: 1001 }));
  return r;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get('key');
    if (url.pathname === '/conformance') return Response.json(await conformance(env.DATA));
    if (url.pathname === '/put' && key) {
      await env.DATA.put(key, url.searchParams.get('value') ?? '');
      return new Response('stored\n');
    }
    if (url.pathname === '/get' && key) {
      const cacheTtl = url.searchParams.get('cacheTtl');
      const options = cacheTtl ? { cacheTtl: Number(cacheTtl) } : {};
      return Response.json({ value: await env.DATA.get(key, options) });
    }
    return new Response('GET /put?key=&value=, /get?key=[&cacheTtl=], /conformance\n', { status: 404 });
  },
};
