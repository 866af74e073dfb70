// A small object API over env.BUCKET, and /conformance: every R2 method, option and limit, run
// inside workerd against the runtime host's R2 service, each outcome reported as JSON for the test.

async function attempt(run) {
  try {
    return { ok: await run() };
  } catch (err) {
    return { error: `${err.name}: ${err.message}` };
  }
}

/** What a test compares of an R2Object (the upload time and version vary). */
function describe(object) {
  if (object === null) return null;
  return {
    key: object.key,
    size: object.size,
    etag: object.etag,
    httpEtag: object.httpEtag,
    versionLength: object.version.length,
    uploadedIsDate: object.uploaded instanceof Date,
    httpMetadata: object.httpMetadata,
    customMetadata: object.customMetadata,
    range: object.range,
    checksums: object.checksums.toJSON(),
    hasBody: 'body' in object,
  };
}

async function hex(algorithm, text) {
  return [...new Uint8Array(await crypto.subtle.digest(algorithm, new TextEncoder().encode(text)))]
    .map((b) => b.toString(16).padStart(2, '0'))
    .join('');
}

async function conformance(bucket) {
  const r = {};
  r.missingGet = await attempt(() => bucket.get('missing'));
  r.missingHead = await attempt(() => bucket.head('missing'));
  r.putText = await attempt(async () =>
    describe(
      await bucket.put('text', 'héllo', {
        httpMetadata: { contentType: 'text/plain; charset=utf-8', cacheControl: 'max-age=60' },
        customMetadata: { by: 'ünïcode' },
      }),
    ),
  );
  r.head = await attempt(async () => describe(await bucket.head('text')));
  r.get = await attempt(async () => {
    const object = await bucket.get('text');
    return { ...describe(object), text: await object.text() };
  });
  r.writeHttpMetadata = await attempt(async () => {
    const headers = new Headers();
    (await bucket.head('text')).writeHttpMetadata(headers);
    return Object.fromEntries(headers);
  });
  await bucket.put('bytes', new Uint8Array([0, 1, 2, 255]).buffer);
  r.bytes = await attempt(async () => [...new Uint8Array(await (await bucket.get('bytes')).arrayBuffer())]);
  r.stream = await attempt(async () => {
    const { readable, writable } = new FixedLengthStream(5);
    const writer = writable.getWriter();
    writer.write(new TextEncoder().encode('strea'));
    writer.close();
    await bucket.put('stream', readable);
    return (await bucket.get('stream')).text();
  });
  r.unknownLengthStream = await attempt(() =>
    bucket.put('nolength', new ReadableStream({ start: (c) => c.close() })),
  );
  r.empty = await attempt(async () => {
    await bucket.put('empty', '');
    const object = await bucket.get('empty');
    return { size: object.size, text: await object.text() };
  });
  await bucket.put('alphabet', 'abcdefghijklmnopqrstuvwxyz');
  r.rangeOffsetLength = await attempt(async () => {
    const object = await bucket.get('alphabet', { range: { offset: 2, length: 3 } });
    return { range: object.range, text: await object.text() };
  });
  r.rangeSuffix = await attempt(async () => (await bucket.get('alphabet', { range: { suffix: 3 } })).text());
  r.rangeHeaders = await attempt(async () =>
    (await bucket.get('alphabet', { range: new Headers({ range: 'bytes=1-3' }) })).text(),
  );
  r.rangeUnsatisfiable = await attempt(() => bucket.get('alphabet', { range: { offset: 42 } }));
  const etag = (await bucket.head('alphabet')).etag;
  r.getIfMatch = await attempt(
    async () => 'body' in (await bucket.get('alphabet', { onlyIf: { etagMatches: etag } })),
  );
  r.getIfMatchFails = await attempt(async () =>
    describe(await bucket.get('alphabet', { onlyIf: { etagMatches: 'nope' } })),
  );
  r.getIfNoneMatchHeaders = await attempt(
    async () =>
      'body' in (await bucket.get('alphabet', { onlyIf: new Headers({ 'if-none-match': `"${etag}"` }) })),
  );
  r.putIfMatchFails = await attempt(() => bucket.put('alphabet', 'x', { onlyIf: { etagMatches: 'nope' } }));
  r.putCreateOnly = await attempt(async () => [
    (await bucket.put('once', 'a', { onlyIf: { etagDoesNotMatch: '*' } })) !== null,
    (await bucket.put('once', 'b', { onlyIf: { etagDoesNotMatch: '*' } })) !== null,
    await (await bucket.get('once')).text(),
  ]);
  r.md5 = await attempt(
    async () => describe(await bucket.put('sum', 'value', { md5: await hex('MD5', 'value') })).checksums,
  );
  r.badMd5 = await attempt(() => bucket.put('sum', 'value', { md5: '0'.repeat(32) }));
  r.sha256 = await attempt(
    async () =>
      describe(await bucket.put('sum', 'value', { sha256: await hex('SHA-256', 'value') })).checksums,
  );
  r.badSha1 = await attempt(() => bucket.put('sum', 'value', { sha1: '0'.repeat(40) }));
  r.bigMetadata = await attempt(() => bucket.put('meta', 'v', { customMetadata: { key: 'x'.repeat(2046) } }));
  r.longKey = await attempt(() => bucket.head('x'.repeat(513)));
  r.longestKey = await attempt(() => bucket.head('x'.repeat(512)));

  for (const key of [
    'list/b',
    'list/a',
    'list/ab',
    'list/a/b',
    'list/é',
    'list/\u{1F600}',
    'list/d/1',
    'list/d/2',
  ])
    await bucket.put(key, key, { httpMetadata: { contentType: 'text/plain' }, customMetadata: { k: key } });
  const names = (listed) => listed.objects.map((o) => o.key);
  r.list = await attempt(async () => {
    const listed = await bucket.list({ prefix: 'list/' });
    return { names: names(listed), truncated: listed.truncated, first: describe(listed.objects[0]) };
  });
  r.listInclude = await attempt(async () => {
    const listed = await bucket.list({ prefix: 'list/a', include: ['httpMetadata', 'customMetadata'] });
    return listed.objects.map((o) => [o.key, o.httpMetadata, o.customMetadata]);
  });
  r.listDelimiter = await attempt(async () => {
    const listed = await bucket.list({ prefix: 'list/', delimiter: '/' });
    return { names: names(listed), delimitedPrefixes: listed.delimitedPrefixes };
  });
  r.listPages = await attempt(async () => {
    const pages = [];
    let cursor;
    do {
      const page = await bucket.list({ prefix: 'list/', limit: 3, cursor });
      pages.push({ names: names(page), truncated: page.truncated });
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor);
    return pages;
  });
  r.listLimitTooHigh = await attempt(() => bucket.list({ limit: 1001 }));
  r.deleteOne = await attempt(async () => {
    await bucket.delete('list/b');
    return bucket.head('list/b');
  });
  r.deleteMany = await attempt(async () => {
    await bucket.delete(['list/a', 'list/ab', 'never-there']);
    return names(await bucket.list({ prefix: 'list/a' }));
  });
  const partSize = 5 * 1024 * 1024;
  r.multipart = await attempt(async () => {
    const upload = await bucket.createMultipartUpload('multi', {
      httpMetadata: { contentType: 'text/plain' },
    });
    const part1 = await upload.uploadPart(1, 'a'.repeat(partSize));
    const part2 = await bucket.resumeMultipartUpload('multi', upload.uploadId).uploadPart(2, 'b');
    const object = await upload.complete([part1, part2]);
    const across = await bucket.get('multi', { range: { offset: partSize - 1, length: 2 } });
    return {
      key: object.key,
      size: object.size,
      etag: object.etag,
      httpMetadata: object.httpMetadata,
      across: await across.text(),
    };
  });
  r.multipartAborted = await attempt(async () => {
    const upload = await bucket.createMultipartUpload('multi-aborted');
    await upload.uploadPart(1, 'x');
    await upload.abort();
    return upload.uploadPart(2, 'y');
  });
  r.multipartTooSmall = await attempt(async () => {
    const upload = await bucket.createMultipartUpload('multi-small');
    const parts = [await upload.uploadPart(1, 'x'), await upload.uploadPart(2, 'y')];
    return upload.complete(parts);
  });
  return r;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/conformance') return Response.json(await conformance(env.BUCKET));
    // The same bytes through the worker without R2 (bench/r2.bench.ts's baseline).
    if (url.pathname === '/echo' && request.method === 'PUT')
      return Response.json({ size: (await request.arrayBuffer()).byteLength });
    if (url.pathname === '/echo') return new Response(new Uint8Array(Number(url.searchParams.get('bytes'))));
    if (url.pathname === '/objects') {
      const listed = await env.BUCKET.list({ prefix: url.searchParams.get('prefix') ?? undefined });
      return Response.json(listed.objects.map((o) => ({ key: o.key, size: o.size, etag: o.etag })));
    }
    if (!url.pathname.startsWith('/objects/')) return new Response('not found', { status: 404 });
    const key = decodeURIComponent(url.pathname.slice('/objects/'.length));
    if (request.method === 'PUT') {
      const object = await env.BUCKET.put(key, request.body, {
        httpMetadata: { contentType: request.headers.get('content-type') ?? 'application/octet-stream' },
      });
      return Response.json({ key: object.key, etag: object.etag, size: object.size });
    }
    if (request.method === 'DELETE') {
      await env.BUCKET.delete(key);
      return new Response(null, { status: 204 });
    }
    const object = await env.BUCKET.get(key, { range: request.headers });
    if (object === null) return new Response('no such object', { status: 404 });
    const headers = new Headers({ etag: object.httpEtag });
    object.writeHttpMetadata(headers);
    return new Response(object.body, { headers, status: request.headers.has('range') ? 206 : 200 });
  },
};
