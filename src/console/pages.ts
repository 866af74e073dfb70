// The console's pages as HTML (docs/console.md "Pages"): fleet, applications, one application,
// events, the confirmation of an action and a refusal. Server-rendered: a page is complete when it
// arrives, works without script, and its only script draws the charts and adds keyboard shortcuts.

import type { DnsCheck } from '../cli/domain-dns.ts';
import type { NodeRow } from '../cli/fleet.ts';
import type { FleetEvent } from '../observability/events.ts';
import type { FreezeRecord } from '../registry/records.ts';
import type { HistoryEntry } from '../runtime-tools/history.ts';
import {
  type ApplicationsView,
  type ApplicationView,
  type AppRecord,
  type EventsView,
  type FleetView,
  isUnavailable,
  type Replica,
  type Section,
  type Unavailable,
} from './data.ts';
import { type Html, html, jsonBlock } from './html.ts';

/** What every page needs to build its links and forms. */
export interface PageContext {
  /** The per-run prefix, `/<token>`. */
  base: string;
  actor: string;
  /** The version of the assets, so a new run never serves a cached old script. */
  assetVersion: string;
  notice?: string;
}

type Tab = 'fleet' | 'apps' | 'events' | null;

export function layout(ctx: PageContext, title: string, tab: Tab, body: Html): string {
  const nav = (id: Tab, href: string, label: string, key: string) =>
    html`<a href="${ctx.base}${href}" ${tab === id ? html`aria-current="page"` : ''} data-key="${key}">${label} <kbd>g ${key}</kbd></a>`;
  return `<!doctype html>${
    html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${title} &middot; svc console</title>
<link rel="stylesheet" href="${ctx.base}/assets/console.css?v=${ctx.assetVersion}">
<link rel="icon" href="data:,">
<script src="${ctx.base}/assets/console.js?v=${ctx.assetVersion}" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header>
<strong class="brand">svc console</strong>
<nav aria-label="Pages">${nav('fleet', '/', 'Fleet', 'f')}${nav('apps', '/apps', 'Applications', 'a')}${nav('events', '/events', 'Events', 'e')}</nav>
<span class="actor" title="The key this console signs with">key <code>${ctx.actor}</code></span>
</header>
<main id="main" tabindex="-1">
${ctx.notice ? html`<p class="notice" role="status">${ctx.notice}</p>` : ''}
${body}
</main>
</body>
</html>`.text
  }`;
}

const dash = html`<span class="muted">&ndash;</span>`;

function labelsOf(labels: Record<string, string> | undefined | null): Html {
  const entries = Object.entries(labels ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
  if (entries.length === 0) return dash;
  return html`${entries.map(([k, v]) => html`<span class="tag">${k}=${v}</span> `)}`;
}

function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

function time(iso: string): Html {
  return html`<time datetime="${iso}">${iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>`;
}

function refusal(section: Unavailable): Html {
  const u = section.unavailable;
  return html`<div class="problem" role="note"><strong>${u.title}</strong>${u.detail ? html`: ${u.detail}` : ''} <code>urn:svc:${u.code}</code> <span class="muted">(${u.status})</span></div>`;
}

function freezeBanner(ctx: PageContext, freeze: FreezeRecord | null): Html {
  if (!freeze) return html``;
  return html`<p class="banner" role="status">Deploys are frozen since ${time(freeze.frozenAt)} by <code>${freeze.by}</code>${freeze.reason ? html`: ${freeze.reason}` : ''}. <a href="${ctx.base}/confirm/unfreeze">Unfreeze&hellip;</a></p>`;
}

function stateBadge(state: string): Html {
  return html`<span class="badge badge-${state}">${state}</span>`;
}

function applicationState(a: AppRecord): Html {
  if (a.blocked) return stateBadge('blocked');
  if (a.retired) return stateBadge('retired');
  return a.deployment ? stateBadge('active') : stateBadge('undeployed');
}

function replicaText(r: Replica): Html {
  return html`<span class="replica"><code>${r.node}</code> ${stateBadge(r.state)}${r.port ? html` :${r.port}` : ''}</span> `;
}

// ---- fleet ----

export function fleetPage(ctx: PageContext, view: FleetView, nowMs: number): string {
  const coordinator = view.coordinator
    ? html`<code>${view.coordinator.node}</code>, fence ${view.coordinator.fence}`
    : html`<span class="muted">none holds the lease</span>`;
  const versions = versionSummary(view.nodes);
  const freeze = view.freeze
    ? html`<dd>frozen since ${time(view.freeze.frozenAt)} by <code>${view.freeze.by}</code>${view.freeze.reason ? html`: ${view.freeze.reason}` : ''} &middot; <a href="${ctx.base}/confirm/unfreeze">Unfreeze&hellip;</a></dd>`
    : html`<dd>open &middot; <a href="${ctx.base}/confirm/freeze">Freeze deploys&hellip;</a></dd>`;
  const rows = view.nodes.map(
    (n) => html`<tr>
<th scope="row"><code>${n.node}</code></th>
<td>${stateBadge(n.state)}</td>
<td>${n.versions.svc ?? '\u2013'}</td>
<td>${n.versions.cell ?? '\u2013'}</td>
<td>${labelsOf(n.labels)}</td>
<td title="${n.seen}">${ago(nowMs - Date.parse(n.seen))}</td>
<td>${n.api}</td>
<td class="num">${view.processes.get(n.node) ?? 0}</td>
</tr>`,
  );
  return layout(
    ctx,
    'Fleet',
    'fleet',
    html`<h1>Fleet</h1>
<dl class="facts">
<dt>Coordinator</dt><dd id="coordinator">${coordinator}</dd>
<dt>Deploys</dt>${freeze}
<dt>Versions</dt><dd>${versions}</dd>
<dt>Applications</dt><dd><a href="${ctx.base}/apps">${view.applications}${view.scoped ? ' in your scope' : ''}</a></dd>
</dl>
<h2>Nodes <span class="count">${view.nodes.length}</span></h2>
${view.fromBucket ? '' : html`<p class="muted">Only the node answering is listed: start the console with bucket flags to list every node, as <code>svc fleet nodes</code> does.</p>`}
<table id="nodes">
<thead><tr><th scope="col">Node</th><th scope="col">State</th><th scope="col">svc</th><th scope="col">cell</th><th scope="col">Labels</th><th scope="col">Last seen</th><th scope="col">API</th><th scope="col">Processes${view.scoped ? ' (in scope)' : ''}</th></tr></thead>
<tbody>${rows}</tbody>
</table>`,
  );
}

function versionSummary(nodes: readonly NodeRow[]): Html {
  const parts: Html[] = [];
  for (const binary of ['svc', 'cell'] as const) {
    const counts = new Map<string, number>();
    for (const n of nodes) {
      const v = n.versions[binary];
      if (v) counts.set(v, (counts.get(v) ?? 0) + 1);
    }
    for (const [v, count] of counts)
      parts.push(html`<span class="tag">${binary} ${v} &times; ${count}</span> `);
  }
  return parts.length ? html`${parts}` : dash;
}

// ---- applications ----

function domainWithDns(host: string, wildcard: boolean, dns: DnsCheck | undefined): Html {
  const verdict = dns
    ? html`<span class="badge badge-${dns.verdict}" title="${dns.why}">${dns.verdict}</span>`
    : html`<span class="muted" title="DNS is being checked; reload to see it">checking</span>`;
  return html`<span class="domain"><span class="tag">${host}${wildcard ? ' (+sub)' : ''}</span> ${verdict}</span> `;
}

// A grid of rows rather than a <table>: a browser skips laying out rows off screen only for
// elements that can be contained (content-visibility), which table rows cannot, and with 1,000
// applications that halves the time to first paint (bench/console.bench.ts); rows come in groups
// (rowGroups below) for the same reason. Rows are written
// lean for the same reason: a link relative to the page (`apps/<name>` from `<base>/apps`), and an
// empty or default cell muted as a whole rather than through an element of its own.

/** Rows in a group the browser may leave unrendered as a whole while it is far off screen. */
const ROWS_PER_GROUP = 100;

/**
 * The body rows in groups of ROWS_PER_GROUP, each full group contained as a whole (`rows-100` in
 * console.css): a browser then skips even the style of rows far off screen, which per-row
 * containment alone does not (a third less main-thread work with 1,000 rows). The remainder is
 * a group of its own without that class, so its height is never guessed from a full group's.
 */
function rowGroups(rows: readonly Html[]): Html[] {
  const groups: Html[] = [];
  for (let i = 0; i < rows.length || i === 0; i += ROWS_PER_GROUP) {
    const group = rows.slice(i, i + ROWS_PER_GROUP);
    const full = group.length === ROWS_PER_GROUP ? ' rows-100' : '';
    groups.push(html`<div role="rowgroup" class="grid-body${full}">${group}</div>`);
  }
  return groups;
}

function mutedCell(text: string): Html {
  return html`<div role="cell" class="muted">${text}</div>`;
}

export function applicationsPage(ctx: PageContext, view: ApplicationsView, query: string): string {
  const wanted = query.trim().toLowerCase();
  const shown = wanted
    ? view.applications.filter((a) => a.name.includes(wanted) || a.domains.some((d) => d.includes(wanted)))
    : view.applications;
  const rows = shown.map((a) => {
    const replicas = view.replicas.get(a.name) ?? [];
    const placement = view.placements.get(a.name);
    const labels = view.scoped ? null : Object.keys(a.labels ?? {}).length ? a.labels : null;
    return html`<div role="row" class="row"><div role="rowheader"><a href="apps/${a.name}">${a.name}</a></div><div role="cell">${applicationState(a)}</div>${
      replicas.length
        ? html`<div role="cell">${replicas.map(replicaText)}</div>`
        : placement?.state === 'pending'
          ? html`<div role="cell">${stateBadge('pending')}</div>`
          : mutedCell('\u2013')
    }${
      a.domains.length
        ? html`<div role="cell">${a.domains.map((d) => domainWithDns(d, a.wildcardDomains.includes(d), view.dns.get(d)))}</div>`
        : mutedCell('\u2013')
    }${view.scoped ? mutedCell('admins only') : labels ? html`<div role="cell">${labelsOf(labels)}</div>` : mutedCell('\u2013')}${
      a.selector ? html`<div role="cell">${labelsOf(a.selector)}</div>` : mutedCell('any')
    }<div role="cell">${String(a.replicas)}</div></div>
`;
  });
  return layout(
    ctx,
    'Applications',
    'apps',
    html`<h1>Applications <span class="count">${shown.length}${shown.length !== view.applications.length ? ` of ${view.applications.length}` : ''}</span></h1>
${freezeBanner(ctx, view.freeze)}
<form class="filter" method="get" action="${ctx.base}/apps" role="search">
<label for="q"><span>Filter by name or domain <kbd>/</kbd></span></label>
<input id="q" name="q" type="search" value="${query}" autocomplete="off" data-filter="#applications">
<button type="submit">Filter</button>
</form>
${view.scoped ? html`<p class="muted">Your key's scope narrows this list.</p>` : ''}
${view.fromBucket ? '' : html`<p class="muted">Replicas on other nodes are read from the bucket: start the console with bucket flags to see them.</p>`}
<div id="applications" class="grid-table" role="table" aria-label="Applications">
<div role="rowgroup" class="grid-head"><div role="row" class="row">${['Application', 'State', 'Replicas (node, process)', 'Domains', 'Labels', 'Selector', 'Replicas wanted'].map((title) => html`<div role="columnheader">${title}</div>`)}</div></div>
${rowGroups(rows)}
</div>`,
  );
}

// ---- one application ----

export function applicationPage(ctx: PageContext, view: ApplicationView): string {
  const a = view.application;
  const name = a.name;
  const confirm = (action: string) => `${ctx.base}/confirm/${action}?app=${encodeURIComponent(name)}`;
  const actions = html`<div class="actions">
${a.blocked ? html`<a class="button" href="${confirm('unblock')}">Unblock&hellip;</a>` : html`<a class="button danger" href="${confirm('block')}">Block&hellip;</a>`}
${a.retired ? html`<a class="button" href="${confirm('unretire')}">Unretire&hellip;</a>` : html`<a class="button danger" href="${confirm('retire')}">Retire&hellip;</a>`}
</div>`;
  return layout(
    ctx,
    name,
    'apps',
    html`<nav class="crumbs" aria-label="Breadcrumb"><a href="${ctx.base}/apps">Applications</a> / </nav>
<h1>${name} ${applicationState(a)}</h1>
${freezeBanner(ctx, view.freeze)}
${actions}
<dl class="facts" id="record">
<dt>Deployment</dt><dd>${a.deployment ? html`<code>${a.deployment}</code>` : dash}</dd>
<dt>Blocked</dt><dd>${a.blocked ? 'yes' : 'no'}</dd>
<dt>Retired</dt><dd>${a.retired ? html`since ${time(a.retired.at)} by <code>${a.retired.by}</code>, grace until ${time(a.retired.graceUntil)}` : 'no'}</dd>
<dt>Replicas wanted</dt><dd>${String(a.replicas)}</dd>
<dt>Selector</dt><dd>${a.selector ? labelsOf(a.selector) : html`<span class="muted">any node</span>`}</dd>
<dt>Labels</dt><dd>${a.labels ? labelsOf(a.labels) : html`<span class="muted">admins only</span>`}</dd>
<dt>Placement</dt><dd>${view.placement ? html`${view.placement.state} on ${view.placement.nodes.map((n) => html`<code>${n}</code> `)}` : dash}</dd>
<dt>Created</dt><dd>${time(a.createdAt)}${a.createdBy ? html` by <code>${a.createdBy}</code>` : ''}</dd>
</dl>
<h2>Replicas</h2>
${replicaTable(view.replicas)}
<h2>Domains</h2>
${domainTable(view)}
<h2>Traffic <span class="muted small">last hour, from the metrics snapshots</span></h2>
${chartSection(ctx, view)}
<h2>Deployments</h2>
${deploymentTable(ctx, name, view.history)}
<h2>Secrets</h2>
${secretList(view.secrets)}
<h2>Bindings</h2>
${bindingTable(view.bindings)}
<h2>Events <span class="muted small">last hour</span></h2>
${isUnavailable(view.events) ? refusal(view.events) : eventTable(ctx, view.events, false)}
<p><a href="${ctx.base}/events?app=${encodeURIComponent(name)}">All events of ${name}</a></p>`,
  );
}

function replicaTable(replicas: readonly Replica[]): Html {
  if (replicas.length === 0) return html`<p class="muted">No process runs it.</p>`;
  return html`<table id="replicas"><thead><tr><th scope="col">Node</th><th scope="col">Process</th><th scope="col">Port</th><th scope="col">Serves</th><th scope="col">Restarts</th><th scope="col">Runtime</th><th scope="col">Detail</th></tr></thead><tbody>${replicas.map(
    (r) =>
      html`<tr><th scope="row"><code>${r.node}</code></th><td>${stateBadge(r.state)}</td><td class="num">${r.port}</td><td>${r.deployment ? html`<code>${r.deployment}</code>` : dash}</td><td class="num">${r.restarts}</td><td>${r.runtimeVersion}</td><td>${r.detail ?? ''}</td></tr>`,
  )}</tbody></table>`;
}

function domainTable(view: ApplicationView): Html {
  const platform = view.platformHosts.length
    ? html`<p>Answers at ${view.platformHosts.map((h) => html`<code>${h}</code> `)}</p>`
    : '';
  if (view.domains.length === 0) return html`${platform}<p class="muted">No custom domains.</p>`;
  return html`${platform}<table id="domains"><thead><tr><th scope="col">Host</th><th scope="col">DNS</th><th scope="col">Why</th></tr></thead><tbody>${view.domains.map(
    (d) =>
      html`<tr><th scope="row">${d.host}${d.wildcard ? ' (+subdomains)' : ''}</th><td>${stateBadge(d.dns.verdict)}</td><td>${d.dns.why}</td></tr>`,
  )}</tbody></table>`;
}

function chartSection(ctx: PageContext, view: ApplicationView): Html {
  if (isUnavailable(view.series)) return refusal(view.series);
  const s = view.series;
  const total = s.requests.reduce((a, b) => a + b, 0);
  return html`<p class="muted small" id="traffic-total">${total} requests in the last hour, counted by ${s.nodes.length ? s.nodes.join(', ') : 'no node'}; one point per ${Math.round(s.stepMs / 1000)} s.</p>
<div class="charts">
<figure><figcaption>Requests</figcaption><div class="chart" data-chart="requests" role="img" aria-label="Requests per step"></div></figure>
<figure><figcaption>Error rate (5xx, %)</figcaption><div class="chart" data-chart="errors" role="img" aria-label="Error rate per step"></div></figure>
<figure><figcaption>Latency p50 / p99 (ms)</figcaption><div class="chart" data-chart="latency" role="img" aria-label="Latency p50 and p99 per step"></div></figure>
</div>
<script type="application/json" id="series">${jsonBlock(s)}</script>
<link rel="stylesheet" href="${ctx.base}/assets/uPlot.min.css?v=${ctx.assetVersion}">
<script src="${ctx.base}/assets/uPlot.iife.min.js?v=${ctx.assetVersion}" defer></script>`;
}

function deploymentTable(
  ctx: PageContext,
  name: string,
  history: Section<{ deployments: HistoryEntry[] }>,
): Html {
  if (isUnavailable(history)) return refusal(history);
  if (history.deployments.length === 0) return html`<p class="muted">No deployments.</p>`;
  const rows = history.deployments.map((d) => {
    const source = d.source
      ? html`${d.source.repo}@${d.source.ref} <code>${d.source.commit.slice(0, 12)}</code>`
      : dash;
    const action = d.serving
      ? html`<span class="badge badge-serving">serving</span>`
      : d.complete
        ? html`<a href="${ctx.base}/confirm/rollback?app=${encodeURIComponent(name)}&amp;to=${encodeURIComponent(d.deployment)}">Roll back to this&hellip;</a>`
        : html`<span class="muted">incomplete</span>`;
    return html`<tr${d.serving ? html` class="serving"` : ''}><th scope="row"><code>${d.deployment}</code></th><td>${d.createdMs === null ? '?' : time(new Date(d.createdMs).toISOString())}</td><td>${d.by ? html`<code>${d.by}</code>` : dash}</td><td>${d.deploy ?? '\u2013'}</td><td>${source}</td><td class="num">${d.bytes}</td><td>${action}</td></tr>`;
  });
  return html`<table id="deployments"><thead><tr><th scope="col">Deployment</th><th scope="col">Published</th><th scope="col">By</th><th scope="col">Deploy</th><th scope="col">Source</th><th scope="col">Bytes</th><th scope="col"></th></tr></thead><tbody>${rows}</tbody></table>`;
}

function secretList(secrets: ApplicationView['secrets']): Html {
  if (isUnavailable(secrets)) return refusal(secrets);
  if (secrets.length === 0) return html`<p class="muted">No secrets.</p>`;
  return html`<table id="secrets"><thead><tr><th scope="col">Name</th><th scope="col">Changed</th><th scope="col">By</th></tr></thead><tbody>${secrets.map(
    (s) =>
      html`<tr><th scope="row"><code>${s.name}</code></th><td>${s.changedAt ? time(s.changedAt) : '\u2013'}</td><td>${s.by ?? '\u2013'}</td></tr>`,
  )}</tbody></table>`;
}

function bindingTable(bindings: ApplicationView['bindings']): Html {
  if (isUnavailable(bindings)) return refusal(bindings);
  if (bindings.length === 0) return html`<p class="muted">No KV namespaces or R2 buckets bound.</p>`;
  return html`<table id="bindings"><thead><tr><th scope="col">Binding</th><th scope="col">Kind</th><th scope="col">Namespace or bucket</th></tr></thead><tbody>${bindings.map(
    (b) =>
      html`<tr><th scope="row"><code>${b.binding}</code></th><td>${b.kind}</td><td><code>${b.target}</code></td></tr>`,
  )}</tbody></table>`;
}

// ---- events ----

const EVENT_COLUMNS = new Set(['at', 'node', 'kind', 'application', 'actor', 'tail']);

function eventDetail(e: FleetEvent): Html {
  const parts = Object.entries(e)
    .filter(([k, v]) => !EVENT_COLUMNS.has(k) && v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  const tail =
    typeof e.tail === 'string' && e.tail
      ? html`<details><summary>output</summary><pre>${e.tail}</pre></details>`
      : '';
  return html`${parts.join(' ')}${tail}`;
}

function eventTable(ctx: PageContext, events: readonly FleetEvent[], withApplication: boolean): Html {
  if (events.length === 0) return html`<p class="muted">No events.</p>`;
  return html`<table class="events" id="events"><thead><tr><th scope="col">Time</th><th scope="col">Node</th><th scope="col">Kind</th>${withApplication ? html`<th scope="col">Application</th>` : ''}<th scope="col">Actor</th><th scope="col">Detail</th></tr></thead><tbody>${events.map(
    (e) =>
      html`<tr><td>${time(e.at)}</td><td><code>${e.node}</code></td><td>${e.kind}</td>${withApplication ? html`<td>${e.application ? html`<a href="${ctx.base}/apps/${e.application}">${e.application}</a>` : '\u2013'}</td>` : ''}<td>${e.actor ?? '\u2013'}</td><td>${eventDetail(e)}</td></tr>`,
  )}</tbody></table>`;
}

export interface EventsFilters {
  app: string;
  kind: string;
  since: string;
  limit: string;
  all: boolean;
}

export function eventsPage(ctx: PageContext, view: EventsView | Unavailable, filters: EventsFilters): string {
  const form = html`<form class="filter" method="get" action="${ctx.base}/events" role="search">
<label>Application <input name="app" value="${filters.app}" list="app-names" autocomplete="off"></label>
<label>Kind <input name="kind" value="${filters.kind}" placeholder="e.g. deploy, application.blocked" autocomplete="off"></label>
<label>Since <input name="since" value="${filters.since}" size="8"></label>
<label>Limit <input name="limit" value="${filters.limit}" size="5" inputmode="numeric"></label>
<label><input type="checkbox" name="all" value="1"${filters.all ? html` checked` : ''}> reconcile passes</label>
<button type="submit">Show</button>
</form>`;
  if ('unavailable' in view)
    return layout(ctx, 'Events', 'events', html`<h1>Events</h1>${form}${refusal(view)}`);
  const note = html`<p class="muted small">${view.events.length} events, newest first${view.beyondLimit ? `; ${view.beyondLimit} older left out by the limit` : ''}; ${filters.all ? 'reconcile passes included' : `${view.heldBack} reconcile passes held back`}${view.scoped ? '; only applications your key reaches' : ''}.</p>`;
  return layout(
    ctx,
    'Events',
    'events',
    html`<h1>Events</h1>${form}<datalist id="app-names">${view.applications.map((a) => html`<option value="${a}">`)}</datalist>${note}${eventTable(ctx, view.events, true)}`,
  );
}

// ---- confirmation and refusal ----

export interface Confirmation {
  action: string;
  title: string;
  consequence: string;
  fields: Record<string, string>;
  /** Free text the action takes (the freeze's reason). */
  reason?: boolean;
  back: string;
  danger: boolean;
}

export function confirmPage(ctx: PageContext, c: Confirmation): string {
  return layout(
    ctx,
    c.title,
    null,
    html`<h1>${c.title}?</h1>
<p>${c.consequence}</p>
<form method="post" action="${ctx.base}/act/${c.action}" class="confirm">
${Object.entries(c.fields).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
${c.reason ? html`<label for="reason">Reason (one line, at most 200 characters)</label><input id="reason" name="reason" maxlength="200" autocomplete="off">` : ''}
<div class="actions"><button type="submit" class="${c.danger ? 'danger' : ''}" autofocus>${c.title}</button> <a class="button" href="${c.back}">Cancel</a></div>
</form>`,
  );
}

export function refusalPage(
  ctx: PageContext,
  what: string,
  problem: { status: number; code: string; title: string; detail?: string },
  back: string,
): string {
  return layout(
    ctx,
    problem.title,
    null,
    html`<h1>${what}: refused</h1>
<div class="problem" role="alert" id="refusal"><p><strong>${problem.title}</strong></p>${problem.detail ? html`<p>${problem.detail}</p>` : ''}<p><code>urn:svc:${problem.code}</code> &middot; HTTP ${problem.status}</p></div>
<p><a href="${back}">Back</a></p>`,
  );
}
