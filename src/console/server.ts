// `svc console`'s web server (docs/console.md "Security" and "Actions"): loopback only, every
// path under a random per-run token, the Host a loopback name with our port (no DNS rebinding),
// every write a same-origin POST (no other page can act through the operator's browser), and
// every page built on the server with the operator's key, which never reaches the browser.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { callNode } from '../cli/client.ts';
import { parseLimit, parseSince } from '../observability/since.ts';
import { isProblem, PROBLEM_CONTENT_TYPE, Problem } from '../problem.ts';
import { type Asset, loadAssets } from './assets.ts';
import {
  applicationsView,
  applicationView,
  type ConsoleSource,
  eventsView,
  fleetView,
  unavailable,
} from './data.ts';
import {
  applicationPage,
  applicationsPage,
  type Confirmation,
  confirmPage,
  eventsPage,
  fleetPage,
  type PageContext,
  refusalPage,
} from './pages.ts';

export interface ConsoleServer {
  /** The URL to open: the origin and the per-run token. */
  url: string;
  port: number;
  close(): Promise<void>;
}

export interface ConsoleOptions {
  source: ConsoleSource;
  host: string;
  port: number;
  /** Where unexpected failures are reported (never to the browser). */
  log?: (line: string) => void;
}

const FORM_BYTES = 4096;
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  // Not no-referrer: with it Chromium sends `Origin: null` on a form's POST, which the origin check refuses.
  'referrer-policy': 'same-origin',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
};

/** Loopback addresses only: the console acts with the operator's key for whoever reaches it. */
export function checkLoopback(host: string): string {
  const bare = host.replace(/^\[|\]$/g, '');
  if (bare === '127.0.0.1' || bare === '::1' || bare === 'localhost' || /^127\.\d+\.\d+\.\d+$/.test(bare))
    return bare;
  throw new Problem(
    'invalid-input',
    'Console listens on loopback only',
    `${host} is not a loopback address; use 127.0.0.1:<port> (the console acts with your key for whoever reaches it)`,
  );
}

export async function startConsole(options: ConsoleOptions): Promise<ConsoleServer> {
  const host = checkLoopback(options.host);
  const token = randomBytes(24).toString('base64url');
  const assets = loadAssets();
  const assetVersion = createHash('sha256')
    .update([...assets.values()].map((a) => a.etag).join())
    .digest('hex')
    .slice(0, 12);
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  let port = 0;
  const server: Server = createServer((request, response) => {
    handle(request, response).catch((err) => {
      if (isProblem(err) && !response.headersSent) return sendProblem(response, err);
      log(
        `svc console: ${request.method} ${redact(request.url ?? '', token)} failed: ${(err as Error).stack ?? err}`,
      );
      if (!response.headersSent) sendProblem(response, new Problem('internal', 'Internal error'));
      else response.destroy();
    });
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://console.invalid');
    if (!hostAllowed(request.headers.host, port)) {
      return sendProblem(
        response,
        new Problem(
          'invalid-input',
          'Unexpected Host',
          'the console answers only to 127.0.0.1, localhost or [::1] at its own port',
        ),
      );
    }
    const rest = stripToken(url.pathname, token);
    if (rest === null) {
      return sendProblem(
        response,
        new Problem(
          'auth-invalid',
          'Console token required',
          "open the URL svc console printed; it carries this run's token",
        ),
      );
    }
    if (!sameOrigin(request, port)) {
      return sendProblem(
        response,
        new Problem(
          'auth-scope',
          'Cross-origin request refused',
          'the console takes requests from its own pages only',
        ),
      );
    }
    const ctx: PageContext = {
      base: `/${token}`,
      actor: options.source.target.key?.id ?? '',
      assetVersion,
    };
    const done = url.searchParams.get('done');
    if (done && Object.hasOwn(DONE, done)) ctx.notice = DONE[done];
    if (request.method === 'POST' && rest.startsWith('/act/'))
      return act(request, response, ctx, rest.slice(5));
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      return sendProblem(response, new Problem('not-found', 'No such page', `${request.method} ${rest}`));
    }
    if (rest.startsWith('/assets/')) return sendAsset(request, response, assets.get(rest.slice(8)));
    const page = await render(ctx, rest, url.searchParams);
    sendPage(response, page.status, page.html);
  }

  async function render(
    ctx: PageContext,
    path: string,
    query: URLSearchParams,
  ): Promise<{ status: number; html: string }> {
    const source = options.source;
    const now = (source.now ?? Date.now)();
    try {
      if (path === '/' || path === '') return ok(fleetPage(ctx, await fleetView(source), now));
      if (path === '/apps')
        return ok(applicationsPage(ctx, await applicationsView(source), query.get('q') ?? ''));
      const appMatch = /^\/apps\/([^/]+)$/.exec(path);
      if (appMatch) return ok(applicationPage(ctx, await applicationView(source, pathSegment(appMatch[1]!))));
      if (path === '/events') return await renderEvents(ctx, query, now);
      const confirmMatch = /^\/confirm\/([a-z]+)$/.exec(path);
      if (confirmMatch && Object.hasOwn(ACTIONS, confirmMatch[1]!)) {
        return ok(confirmPage(ctx, ACTIONS[confirmMatch[1]!]!.confirm(ctx, query)));
      }
      throw new Problem('not-found', 'No such page', path);
    } catch (err) {
      if (!isProblem(err)) throw err;
      return { status: err.status, html: refusalPage(ctx, 'This page', err, `${ctx.base}/`) };
    }
  }

  async function renderEvents(ctx: PageContext, query: URLSearchParams, now: number) {
    const filters = {
      app: query.get('app') ?? '',
      kind: query.get('kind') ?? '',
      since: query.get('since') || '1h',
      limit: query.get('limit') || '200',
      all: query.get('all') === '1',
    };
    let view: Awaited<ReturnType<typeof eventsView>> | ReturnType<typeof unavailable>;
    let status = 200;
    try {
      view = await eventsView(options.source, {
        sinceMs: parseSince(filters.since, now),
        limit: parseLimit(filters.limit),
        all: filters.all,
        ...(filters.app ? { application: filters.app } : {}),
        ...(filters.kind ? { kind: filters.kind } : {}),
      });
    } catch (err) {
      view = unavailable(err);
      status = view.unavailable.status;
    }
    return { status, html: eventsPage(ctx, view, filters) };
  }

  async function act(request: IncomingMessage, response: ServerResponse, ctx: PageContext, name: string) {
    // Own members only: `constructor` is no action.
    const action = Object.hasOwn(ACTIONS, name) ? ACTIONS[name] : undefined;
    if (!action) return sendProblem(response, new Problem('not-found', 'No such action', name));
    const form = await readForm(request);
    const back = action.back(ctx, form);
    try {
      await action.run(options.source, form);
    } catch (err) {
      if (!isProblem(err)) throw err;
      return sendPage(response, err.status, refusalPage(ctx, action.what(form), err, back));
    }
    const to = new URL(back, 'http://console.invalid');
    to.searchParams.set('done', name);
    response.writeHead(303, {
      ...SECURITY_HEADERS,
      location: `${to.pathname}${to.search}`,
      'cache-control': 'no-store',
    });
    response.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}/${token}/`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const ok = (html: string) => ({ status: 200, html });

/** A percent-decoded path segment; broken encoding is bad input, as the node API says. */
function pathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new Problem('invalid-input', 'Malformed request', 'the path has broken percent-encoding');
  }
}

function redact(path: string, token: string): string {
  return path.split(token).join('<token>');
}

function hostAllowed(header: string | undefined, port: number): boolean {
  if (!header) return false;
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(header.toLowerCase());
  if (!match || Number(match[3]) !== port) return false;
  const name = match[1] ?? match[2]!;
  return name === 'localhost' || name === '::1' || /^127\.\d+\.\d+\.\d+$/.test(name);
}

/** The path after `/<token>`, or null when the token is missing or wrong (compared in constant time). */
function stripToken(pathname: string, token: string): string | null {
  const match = /^\/([^/]+)(\/.*)?$/.exec(pathname);
  if (!match) return null;
  const given = Buffer.from(match[1]!);
  const wanted = Buffer.from(token);
  if (given.length !== wanted.length || !timingSafeEqual(given, wanted)) return null;
  return match[2] ?? '/';
}

/**
 * A write must come from the console's own pages: its Origin is ours (browsers send it on every
 * POST). Any request a browser marks as coming from another site is refused too, reads included.
 */
function sameOrigin(request: IncomingMessage, port: number): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') return false;
  if (request.method === 'GET' || request.method === 'HEAD') return true;
  const origin = request.headers.origin;
  if (!origin) return site === 'same-origin';
  try {
    const url = new URL(origin);
    return url.protocol === 'http:' && hostAllowed(url.host, port) && url.host === request.headers.host;
  } catch {
    return false;
  }
}

async function readForm(request: IncomingMessage): Promise<URLSearchParams> {
  const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new Problem(
      'invalid-input',
      'Unsupported content type',
      'actions take a form (application/x-www-form-urlencoded)',
    );
  }
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > FORM_BYTES)
      throw new Problem('resource-limit', 'Request body too large', `at most ${FORM_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function sendPage(response: ServerResponse, status: number, page: string): void {
  const body = Buffer.from(page);
  response.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': 'text/html; charset=utf-8',
    'content-length': body.length,
    'cache-control': 'no-store',
  });
  response.end(body);
}

function sendProblem(response: ServerResponse, problem: Problem): void {
  const body = Buffer.from(JSON.stringify(problem.toJSON()));
  response.writeHead(problem.status, {
    ...SECURITY_HEADERS,
    'content-type': PROBLEM_CONTENT_TYPE,
    'content-length': body.length,
    'cache-control': 'no-store',
  });
  response.end(body);
}

function sendAsset(request: IncomingMessage, response: ServerResponse, asset: Asset | undefined): void {
  if (!asset) {
    sendProblem(response, new Problem('not-found', 'No such page', 'no such asset'));
    return;
  }
  const headers = {
    ...SECURITY_HEADERS,
    etag: asset.etag,
    'content-type': asset.type,
    'cache-control': 'private, max-age=86400, immutable',
  };
  if (request.headers['if-none-match'] === asset.etag) {
    response.writeHead(304, headers);
    response.end();
    return;
  }
  response.writeHead(200, { ...headers, 'content-length': asset.body.length });
  response.end(request.method === 'HEAD' ? undefined : asset.body);
}

// ---- actions: what the CLI's admin commands do, each behind a confirmation ----

interface Action {
  what(form: URLSearchParams): string;
  confirm(ctx: PageContext, query: URLSearchParams): Confirmation;
  run(source: ConsoleSource, form: URLSearchParams): Promise<unknown>;
  back(ctx: PageContext, form: URLSearchParams): string;
}

const DONE: Record<string, string> = {
  block: 'Blocked: every node stops serving it at its next reconcile pass.',
  unblock: 'Unblocked: nodes serve it again at their next reconcile pass.',
  retire: 'Retired: it stops serving; unretire within the grace period restores it.',
  unretire: 'Unretired.',
  freeze: 'Deploys are frozen fleet-wide.',
  unfreeze: 'The freeze is lifted (or there was none).',
  rollback: 'Rolled back: every node serves that deployment within a pass.',
};

const appPath = (form: URLSearchParams) => `/v1/applications/${encodeURIComponent(form.get('app') ?? '')}`;
const appBack = (ctx: PageContext, form: URLSearchParams) =>
  `${ctx.base}/apps/${encodeURIComponent(form.get('app') ?? '')}`;

function applicationAction(verb: string, title: string, consequence: string, danger: boolean): Action {
  return {
    what: (form) => `${title} ${form.get('app') ?? ''}`,
    confirm: (ctx, query) => ({
      action: verb,
      title: `${title} ${query.get('app') ?? ''}`,
      consequence,
      fields: { app: query.get('app') ?? '' },
      back: appBack(ctx, query),
      danger,
    }),
    run: (source, form) => callNode(source.target, 'POST', `${appPath(form)}/${verb}`),
    back: appBack,
  };
}

const ACTIONS: Record<string, Action> = {
  block: applicationAction(
    'block',
    'Block',
    'Every node stops serving it at its next reconcile pass, it leaves the routing, and deploys to it are refused. Nothing is deleted. Admins only.',
    true,
  ),
  unblock: applicationAction(
    'unblock',
    'Unblock',
    'Nodes serve it again at their next reconcile pass. Admins only.',
    false,
  ),
  retire: applicationAction(
    'retire',
    'Retire',
    'It stops serving and its grace period starts; after it, the application may be deleted.',
    true,
  ),
  unretire: applicationAction(
    'unretire',
    'Unretire',
    'Restores the state it had before it was retired.',
    false,
  ),
  freeze: {
    what: () => 'Freeze deploys',
    confirm: (ctx) => ({
      action: 'freeze',
      title: 'Freeze deploys',
      consequence:
        'Every node refuses deploys and rollbacks until the freeze is lifted; serving goes on. Admins only.',
      fields: {},
      reason: true,
      back: `${ctx.base}/`,
      danger: true,
    }),
    run: (source, form) => {
      const reason = form.get('reason') ?? '';
      return callNode(source.target, 'POST', '/v1/fleet/freeze', reason.trim() ? { body: { reason } } : {});
    },
    back: (ctx) => `${ctx.base}/`,
  },
  unfreeze: {
    what: () => 'Unfreeze deploys',
    confirm: (ctx) => ({
      action: 'unfreeze',
      title: 'Unfreeze deploys',
      consequence: 'Nodes accept deploys again. Admins only.',
      fields: {},
      back: `${ctx.base}/`,
      danger: false,
    }),
    run: (source) => callNode(source.target, 'DELETE', '/v1/fleet/freeze'),
    back: (ctx) => `${ctx.base}/`,
  },
  rollback: {
    what: (form) => `Roll back ${form.get('app') ?? ''}`,
    confirm: (ctx, query) => ({
      action: 'rollback',
      title: `Roll back ${query.get('app') ?? ''}`,
      consequence: `The fleet-wide selector moves to deployment ${query.get('to') ?? ''}; every node serves it within a pass. A rollback is a deploy: refused while deploys are frozen.`,
      fields: { app: query.get('app') ?? '', to: query.get('to') ?? '' },
      back: appBack(ctx, query),
      danger: true,
    }),
    run: (source, form) =>
      callNode(source.target, 'POST', `${appPath(form)}/rollback`, {
        body: form.get('to') ? { to: form.get('to') } : {},
      }),
    back: appBack,
  },
};
