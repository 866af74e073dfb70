// A link shortener over env.LINKS: POST /links makes a short code for a URL, GET /<code> redirects
// to it, GET /links lists the codes, DELETE /links/<code> removes one. Each link is one KV key
// whose value is the URL, with its creation time as metadata and an expiration KV enforces.

const ALPHABET = 'abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789';
const DAY_S = 24 * 60 * 60;

function newCode() {
  return [...crypto.getRandomValues(new Uint8Array(7))].map((b) => ALPHABET[b % ALPHABET.length]).join('');
}

function isWebUrl(text) {
  try {
    return ['http:', 'https:'].includes(new URL(text).protocol);
  } catch {
    return false;
  }
}

async function create(request, env) {
  const { url, days = 30 } = await request.json().catch(() => ({}));
  if (!isWebUrl(url)) return Response.json({ error: 'url must be an http or https URL' }, { status: 400 });
  if (!Number.isInteger(days) || days < 1 || days > 365) {
    return Response.json({ error: 'days must be a whole number from 1 to 365' }, { status: 400 });
  }
  const code = newCode();
  await env.LINKS.put(code, url, { expirationTtl: days * DAY_S, metadata: { created: Date.now() } });
  return Response.json({ code, url, short: new URL(`/${code}`, request.url).href }, { status: 201 });
}

async function list(env) {
  const codes = [];
  let cursor;
  do {
    const page = await env.LINKS.list({ cursor });
    for (const key of page.keys) codes.push({ code: key.name, expiration: key.expiration, ...key.metadata });
    cursor = page.list_complete ? undefined : page.cursor;
  } while (cursor);
  return Response.json(codes);
}

export default {
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (pathname === '/links' && request.method === 'POST') return create(request, env);
    if (pathname === '/links' && request.method === 'GET') return list(env);
    if (pathname.startsWith('/links/') && request.method === 'DELETE') {
      await env.LINKS.delete(pathname.slice('/links/'.length));
      return new Response(null, { status: 204 });
    }
    const url = request.method === 'GET' ? await env.LINKS.get(pathname.slice(1)) : null;
    return url === null ? new Response('no such link\n', { status: 404 }) : Response.redirect(url, 302);
  },
};
