// The static-asset router that runs inside workerd in front of the user's worker (docs/runtime.md: assets
// served). It answers GET and HEAD for files listed in
// the deployment's `assets.json` from the blob folder, and hands every other request to the
// worker, as Workers' own asset handling does by default. Without a FALLBACK binding it is the
// worker's ASSETS binding: assets only, `not_found_handling` applies.
//
// The source below is JavaScript for workerd, kept as a string so it ships with the runtime.

export const ROUTER_MODULE = 'cell-asset-router.js';

/**
 * The module of a deployment of assets alone (no `main`). The router then has no worker to hand
 * unmatched requests to, so `not_found_handling` applies to them, as on Workers.
 */
export const ASSETS_ONLY_MODULE = 'cell-assets-only.js';

export const ROUTER_SOURCE = `

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method === 'GET' || request.method === 'HEAD') {
      const found = lookup(url.pathname, env.CONFIG.html_handling, env.MANIFEST);
      if (found && found.redirect) {
        return new Response(null, { status: 307, headers: { location: found.redirect + url.search } });
      }
      if (found) return serve(request, env, found.entry, 200);
    }
    if (env.FALLBACK) return env.FALLBACK.fetch(request);
    return notFound(request, env, url.pathname);
  },
};

function decode(pathname) {
  try {
    return decodeURIComponent(pathname);
  } catch {
    return pathname;
  }
}

// Matches a request path to a file, with the html_handling rules of Workers static assets.
function lookup(pathname, handling, files) {
  const path = decode(pathname);
  if (files[path]) return { entry: files[path] };
  if (handling === 'none') return null;
  if (path.endsWith('/')) {
    if (files[path + 'index.html']) {
      if (handling === 'drop-trailing-slash' && path !== '/') return { redirect: path.slice(0, -1) };
      return { entry: files[path + 'index.html'] };
    }
    if (path !== '/' && files[path.slice(0, -1) + '.html']) {
      if (handling === 'force-trailing-slash') return { entry: files[path.slice(0, -1) + '.html'] };
      return { redirect: path.slice(0, -1) };
    }
    return null;
  }
  if (files[path + '.html']) {
    if (handling === 'force-trailing-slash') return { redirect: path + '/' };
    return { entry: files[path + '.html'] };
  }
  if (files[path + '/index.html']) {
    if (handling === 'drop-trailing-slash') return { entry: files[path + '/index.html'] };
    return { redirect: path + '/' };
  }
  return null;
}

async function serve(request, env, entry, status) {
  const etag = '"' + entry.blob + '"';
  const headers = new Headers({ 'content-type': entry.content_type, etag, 'cache-control': 'public, max-age=0, must-revalidate' });
  if (status === 200 && request.headers.get('if-none-match') === etag) return new Response(null, { status: 304, headers });
  const blob = await env.BLOBS.fetch('http://blobs/' + entry.blob, { method: request.method === 'HEAD' ? 'HEAD' : 'GET' });
  if (!blob.ok) return new Response('asset missing from this node', { status: 502 });
  headers.set('content-length', String(entry.size));
  return new Response(request.method === 'HEAD' ? null : blob.body, { status, headers });
}

async function notFound(request, env, pathname) {
  const files = env.MANIFEST;
  const mode = env.CONFIG.not_found_handling;
  if (mode === 'single-page-application' && files['/index.html']) return serve(request, env, files['/index.html'], 200);
  if (mode === '404-page') {
    const parts = decode(pathname).split('/').slice(0, -1);
    while (parts.length > 0) {
      const candidate = parts.join('/') + '/404.html';
      if (files[candidate]) return serve(request, env, files[candidate], 404);
      parts.pop();
    }
  }
  return new Response('Not Found', { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8' } });
}
`;
