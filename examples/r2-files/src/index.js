// A file drop over env.FILES: GET / lists the files with an upload form, POST / stores the form's
// file, PUT /files/<name> stores the request body with its content headers, GET /files/<name>
// serves a file with its etag, ranges and conditional requests as R2 answers them, DELETE removes
// it. The R2 calls are those of Cloudflare's own examples
// (developers.cloudflare.com/r2/api/workers/workers-api-usage/).

const escapeHtml = (text) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c],
  );

async function page(env) {
  const listed = await env.FILES.list({ include: ['httpMetadata'] });
  const rows = listed.objects
    .map((o) => {
      const href = `/files/${encodeURIComponent(o.key)}`;
      return `<li><a href="${escapeHtml(href)}">${escapeHtml(o.key)}</a> ${o.size} bytes, ${escapeHtml(o.httpMetadata.contentType ?? '-')}</li>`;
    })
    .join('\n');
  const html = `<!doctype html><title>Files</title><h1>Files</h1>
<form method="post" enctype="multipart/form-data"><input type="file" name="file"> <button>Upload</button></form>
<ul>
${rows}
</ul>\n`;
  return new Response(html, { headers: { 'content-type': 'text/html; charset=utf-8' } });
}

async function upload(request, env) {
  const file = (await request.formData()).get('file');
  if (!(file instanceof File) || file.name === '')
    return new Response('no file in the form\n', { status: 400 });
  await env.FILES.put(file.name, file, {
    httpMetadata: { contentType: file.type || 'application/octet-stream' },
  });
  return new Response(null, { status: 303, headers: { location: '/' } });
}

async function serve(request, env, key) {
  const object = await env.FILES.get(key, { range: request.headers, onlyIf: request.headers });
  if (object === null) return new Response('no such file\n', { status: 404 });
  const headers = new Headers({ etag: object.httpEtag, 'accept-ranges': 'bytes' });
  object.writeHttpMetadata(headers);
  if (!('body' in object)) return new Response(null, { status: 304, headers });
  if (!request.headers.has('range')) return new Response(object.body, { headers });
  const { offset, length } = object.range;
  headers.set('content-range', `bytes ${offset}-${offset + length - 1}/${object.size}`);
  return new Response(object.body, { status: 206, headers });
}

export default {
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (pathname === '/') return request.method === 'POST' ? upload(request, env) : page(env);
    if (!pathname.startsWith('/files/')) return new Response('not found\n', { status: 404 });
    const key = decodeURIComponent(pathname.slice('/files/'.length));
    switch (request.method) {
      case 'GET':
        return serve(request, env, key);
      case 'PUT': {
        const object = await env.FILES.put(key, request.body, { httpMetadata: request.headers });
        return Response.json({ key: object.key, size: object.size, etag: object.etag }, { status: 201 });
      }
      case 'DELETE':
        await env.FILES.delete(key);
        return new Response(null, { status: 204 });
      default:
        return new Response('method not allowed\n', { status: 405, headers: { allow: 'GET, PUT, DELETE' } });
    }
  },
};
