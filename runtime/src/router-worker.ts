// The static-asset router that runs inside workerd in front of the user's worker (docs/assets.md,
// docs/runtime.md "cell serve"). It decides, as Cloudflare's router and asset workers do, whether a
// request goes to the worker or to the assets (`run_worker_first`, navigation requests, whether an
// asset would answer), and answers asset requests: `_redirects`, `html_handling`,
// `not_found_handling`, conditional requests, then `_headers` on every answer it gives. Without a
// FALLBACK binding it is the worker's ASSETS binding (or a deployment of assets alone): assets only,
// with `not_found_handling` always applied.
//
// CONFIG is what asset-rules.ts `routerConfig` builds; MANIFEST maps request paths to blobs.
// The source below is JavaScript for workerd, kept as a string so it ships with the runtime.

export const ROUTER_MODULE = 'cell-asset-router.js';

/**
 * The module of a deployment of assets alone (no `main`). The router then has no worker to hand
 * unmatched requests to, so `not_found_handling` applies to them, as on Workers.
 */
export const ASSETS_ONLY_MODULE = 'cell-assets-only.js';

export const ROUTER_SOURCE = `
const REDIRECT_STATUSES = [301, 302, 303, 307, 308];
let compiledFor = null;
let compiled = null;

export default {
  async fetch(request, env) {
    const rules = compile(env.CONFIG);
    if (!env.FALLBACK) return assetAnswer(request, env, rules, env.CONFIG.not_found_handling);
    const config = env.CONFIG;
    const { pathname } = new URL(request.url);
    const routes = config.run_worker_first;
    if (routes === true) return env.FALLBACK.fetch(request);
    const routed = routes && typeof routes === 'object';
    if (routed) {
      if (rules.toAssets.some((r) => r.test(pathname))) return assetAnswer(request, env, rules, config.not_found_handling);
      if (rules.toWorker.some((r) => r.test(pathname))) return env.FALLBACK.fetch(request);
    }
    // not_found_handling answers in front of the worker only with route lists, or for a
    // browser's navigation when the compatibility date or flags prefer assets for it.
    const navigation = config.navigation_prefers_assets && request.headers.get('sec-fetch-mode') === 'navigate';
    const notFound = routed || navigation ? config.not_found_handling : 'none';
    const decision = decide(request, env.MANIFEST, config, rules, notFound);
    if (decision.kind === 'none') return env.FALLBACK.fetch(request);
    return finish(request, env, rules, decision);
  },
};

function compile(config) {
  if (compiledFor === config) return compiled;
  const routes = config.run_worker_first && typeof config.run_worker_first === 'object' ? config.run_worker_first : { worker: [], assets: [] };
  compiled = {
    toWorker: routes.worker.map((s) => new RegExp(s)),
    toAssets: routes.assets.map((s) => new RegExp(s)),
    headers: config.headers.map((h) => ({ ...h, regex: new RegExp(h.regex) })),
    dynamic: config.redirects.dynamic.map((r) => ({ ...r, regex: new RegExp(r.regex) })),
  };
  compiledFor = config;
  return compiled;
}

async function assetAnswer(request, env, rules, notFound) {
  return finish(request, env, rules, decide(request, env.MANIFEST, env.CONFIG, rules, notFound));
}

/**
 * What the assets answer: { kind: 'redirect', status, location }, { kind: 'asset', path, status },
 * { kind: 'status', status } or { kind: 'none' } (nothing here: the worker's turn, else a 404).
 */
function decide(request, files, config, rules, notFound) {
  const url = new URL(request.url);
  let pathname = url.pathname;
  let rewritten = false;
  const rule = redirectFor(config, rules, url);
  // A destination a placeholder made unparsable (only possible in its host) is no redirect.
  const target = rule ? parseOrNull(rule.to, url) : null;
  if (target && rule.status !== 200) {
    return { kind: 'redirect', status: REDIRECT_STATUSES.includes(rule.status) ? rule.status : 302, location: location(target, url) };
  }
  if (target) {
    // A 200 rule serves another asset under this URL; nothing else, not even the worker.
    pathname = target.pathname;
    rewritten = true;
  }
  const decoded = decodePath(pathname);
  const intent = resolve(decoded, files, config.html_handling, notFound, false);
  if (!intent) return rewritten ? { kind: 'status', status: 404 } : { kind: 'none' };
  if (request.method !== 'GET' && request.method !== 'HEAD') return { kind: 'status', status: 405 };
  const canonical = encodePath(intent.redirect ?? decoded);
  if (intent.redirect || canonical !== pathname) {
    return { kind: 'redirect', status: 307, location: canonical + url.search };
  }
  return { kind: 'asset', path: intent.path, status: intent.status };
}

function redirectFor(config, rules, url) {
  const fixed = config.redirects.static;
  if (Object.hasOwn(fixed, url.pathname)) return fixed[url.pathname];
  for (const rule of rules.dynamic) {
    const match = rule.regex.exec(url.pathname);
    if (!match) continue;
    const to = substitute(rule.to, match.groups).trim();
    // A relative destination never gains a host through an empty splat: collapse its slashes.
    return { status: rule.status, to: /^\\w+:\\/\\//.test(to) ? to : to.replace(/\\/+/g, '/') };
  }
  return null;
}

function substitute(text, groups) {
  if (!groups) return text;
  return text.replace(/:([A-Za-z]\\w*)/g, (whole, name) => (Object.hasOwn(groups, name) && groups[name] !== undefined ? groups[name] : whole));
}

function parseOrNull(to, base) {
  try {
    return new URL(to, base);
  } catch {
    return null;
  }
}

function location(target, url) {
  const search = target.search || url.search;
  if (target.origin === url.origin) return target.pathname + search + target.hash;
  return target.href.slice(0, target.href.length - target.search.length - target.hash.length) + search + target.hash;
}

// Each segment decoded on its own (a malformed one kept as sent), repeated slashes made one.
function decodePath(pathname) {
  return pathname
    .split('/')
    .map((segment) => {
      try {
        return decodeURIComponent(segment);
      } catch {
        return segment;
      }
    })
    .join('/')
    .replace(/\\/+/g, '/');
}

function encodePath(path) {
  return path.split('/').map((segment) => encodeURIComponent(segment)).join('/');
}

// html_handling: which file answers a decoded path, or where its canonical URL is. Each mode
// tries the same candidates in the same order as Cloudflare's asset worker.
function resolve(path, files, mode, notFound, nested) {
  const has = (p) => Object.hasOwn(files, p);
  const asset = (p) => ({ path: p, status: 200 });
  // Redirect to dest only when dest is no file itself and serves the very file we looked at.
  const moved = (file, dest) => {
    if (nested || has(dest) || !has(file)) return null;
    const there = resolve(dest, files, mode, notFound, true);
    return there && there.path === file ? { redirect: dest } : null;
  };
  const cut = (n) => path.slice(0, path.length - n);
  const exact = has(path);
  let found = null;
  if (mode === 'none') return exact ? asset(path) : fallback(path, files, notFound);
  if (mode === 'auto-trailing-slash') {
    if (path.endsWith('/index')) {
      if (exact) return asset(path);
      found = moved(path + '.html', cut(5)) || moved(cut(6) + '.html', cut(6));
    } else if (path.endsWith('/index.html')) {
      found = moved(path, cut(10)) || moved(cut(11) + '.html', cut(11));
    } else if (path.endsWith('/')) {
      if (has(path + 'index.html')) return asset(path + 'index.html');
      found = moved(cut(1) + '.html', cut(1));
    } else if (path.endsWith('.html')) {
      found = moved(path, cut(5)) || moved(cut(5) + '/index.html', cut(5) + '/');
    }
    if (found) return found;
    if (exact) return asset(path);
    if (has(path + '.html')) return asset(path + '.html');
    return moved(path + '/index.html', path + '/') || fallback(path, files, notFound);
  }
  if (mode === 'force-trailing-slash') {
    if (path.endsWith('/index')) {
      if (exact) return asset(path);
      found = moved(path + '.html', cut(5)) || moved(cut(6) + '.html', cut(5));
    } else if (path.endsWith('/index.html')) {
      found = moved(path, cut(10)) || moved(cut(11) + '.html', cut(10));
    } else if (path.endsWith('/')) {
      if (has(path + 'index.html')) return asset(path + 'index.html');
      if (has(cut(1) + '.html')) return asset(cut(1) + '.html');
    } else if (path.endsWith('.html')) {
      found = moved(path, cut(5) + '/');
      if (!found && exact) return asset(path);
      found = found || moved(cut(5) + '/index.html', cut(5) + '/');
    }
    if (found) return found;
    if (exact) return asset(path);
    return moved(path + '.html', path + '/') || moved(path + '/index.html', path + '/') || fallback(path, files, notFound);
  }
  // drop-trailing-slash
  if (path.endsWith('/index')) {
    if (exact) return asset(path);
    found = path === '/index' ? moved('/index.html', '/') : moved(cut(6) + '.html', cut(6)) || moved(path + '.html', cut(6));
  } else if (path.endsWith('/index.html')) {
    if (path === '/index.html') found = moved('/index.html', '/');
    else {
      found = moved(path, cut(11));
      if (!found && exact) return asset(path);
      found = found || moved(cut(11) + '.html', cut(11));
    }
  } else if (path.endsWith('/')) {
    if (path === '/') {
      if (has('/index.html')) return asset('/index.html');
    } else {
      found = moved(cut(1) + '.html', cut(1)) || moved(cut(1) + '/index.html', cut(1));
    }
  } else if (path.endsWith('.html')) {
    found = moved(path, cut(5)) || moved(cut(5) + '/index.html', cut(5));
  }
  if (found) return found;
  if (exact) return asset(path);
  if (has(path + '.html')) return asset(path + '.html');
  if (has(path + '/index.html')) return asset(path + '/index.html');
  return fallback(path, files, notFound);
}

// not_found_handling: the SPA's /index.html with 200, or the nearest 404.html up the path with 404.
function fallback(path, files, notFound) {
  if (notFound === 'single-page-application') {
    return Object.hasOwn(files, '/index.html') ? { path: '/index.html', status: 200 } : null;
  }
  if (notFound === '404-page') {
    let dir = path;
    while (dir) {
      dir = dir.slice(0, dir.lastIndexOf('/'));
      if (Object.hasOwn(files, dir + '/404.html')) return { path: dir + '/404.html', status: 404 };
    }
  }
  return null;
}

async function finish(request, env, rules, decision) {
  let response;
  if (decision.kind === 'redirect') {
    response = new Response(null, { status: decision.status, headers: { location: decision.location } });
  } else if (decision.kind === 'asset') {
    response = await serve(request, env, env.MANIFEST[decision.path], decision.status);
  } else {
    response = new Response(null, { status: decision.kind === 'status' ? decision.status : 404 });
  }
  return withCustomHeaders(request, response, rules);
}

async function serve(request, env, entry, status) {
  const etag = '"' + entry.blob + '"';
  const headers = new Headers({ 'content-type': entry.content_type, etag });
  if (!request.headers.has('authorization') && !request.headers.has('range')) {
    headers.set('cache-control', 'public, max-age=0, must-revalidate');
  }
  const ifNoneMatch = request.headers.get('if-none-match');
  if (ifNoneMatch === etag || ifNoneMatch === 'W/' + etag) return new Response(null, { status: 304, headers });
  const blob = await env.BLOBS.fetch('http://blobs/' + entry.blob, { method: request.method === 'HEAD' ? 'HEAD' : 'GET' });
  if (!blob.ok) return new Response('asset missing from this node', { status: 502 });
  headers.set('content-length', String(entry.size));
  return new Response(request.method === 'HEAD' ? null : blob.body, { status, headers });
}

// _headers: every matching rule in file order detaches its names, then sets its values; a name
// several rules set is joined, one they do not set keeps (or loses) the router's own value.
function withCustomHeaders(request, response, rules) {
  if (rules.headers.length === 0) return response;
  const url = new URL(request.url);
  const matched = rules.headers.filter((h) => h.regex.test(h.host ? 'https://' + url.hostname + url.pathname : url.pathname));
  if (matched.length === 0) return response;
  const out = new Response(response.body, response);
  const set = new Set();
  for (const rule of matched) {
    const groups = rule.regex.exec(rule.host ? 'https://' + url.hostname + url.pathname : url.pathname).groups;
    for (const name of rule.unset) out.headers.delete(name);
    for (const [name, value] of rule.set) {
      const filled = substitute(value, groups);
      if (set.has(name)) out.headers.append(name, filled);
      else {
        out.headers.set(name, filled);
        set.add(name);
      }
    }
  }
  return out;
}
`;
