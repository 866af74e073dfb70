// The `_headers` and `_redirects` files of a deployment's assets, and the router's configuration
// built from them (docs/assets.md "_headers", "_redirects", "run_worker_first"). Parsed at publish
// time with Workers static assets' own grammar and limits; what Cloudflare skips with a warning is
// skipped here with the same warning, so a file never fails a publish. Pure: text in, rules and
// warnings out. The serve-time half (matching and applying) is the router (router-worker.ts),
// which receives the compiled form `routerConfig` builds.

import type { AssetsConfig, HeaderRule, RedirectRule } from '../../src/runtime-tools/layout.ts';

export type { HeaderRule, RedirectRule };

/** Workers' limits on the two files (workers-shared's configuration constants). */
export const MAX_LINE_LENGTH = 2000;
export const MAX_HEADER_RULES = 100;
export const MAX_STATIC_REDIRECTS = 2000;
export const MAX_DYNAMIC_REDIRECTS = 100;
export const REDIRECT_STATUSES: readonly number[] = [200, 301, 302, 303, 307, 308];

/** Rules kept and one warning per line skipped, `<file>:<line>: <why>` (the line left out when unknown). */
export interface ParsedRules<T> {
  rules: T[];
  warnings: string[];
}

/** A placeholder: a colon, a letter, then letters, digits and underscores. */
const PLACEHOLDER = /:[A-Za-z]\w*/;
/** An absolute rule URL: `https://` and a host. */
const ABSOLUTE = /^https:\/\/+([^/]+)\/?(.*)$/;
/** An RFC 9110 field name. */
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * A rule's URL as the asset router compares it: a path normalised as a browser would send it
 * (dot segments resolved, unsafe characters percent-encoded), or `https://host/path`.
 * Answers the normalised URL or why the token is no rule URL.
 */
export function normaliseRuleUrl(
  token: string,
  options: { relativeOnly: boolean; keepQuery: boolean },
): { url: string } | { why: string } {
  const absolute = ABSOLUTE.exec(token);
  if (absolute) {
    if (options.relativeOnly) return { why: `only relative URLs are allowed, not ${token}` };
    if (/:\d+$/.test(absolute[1]!)) return { why: `a port may not be given (${token})` };
    const path = normalisePath(absolute[2]!, options.keepQuery);
    return path === null ? { why: `${token} is no URL` } : { url: `https://${absolute[1]}${path}` };
  }
  const path = token.startsWith('/') || options.relativeOnly ? normalisePath(token, options.keepQuery) : null;
  if (path === null) {
    return {
      why: options.relativeOnly
        ? 'a URL must begin with a forward slash'
        : 'a URL must be relative (begin with a forward slash) or use https://',
    };
  }
  return { url: path };
}

function normalisePath(path: string, keepQuery: boolean): string | null {
  try {
    // A base with an empty authority keeps every path as a path (`//x` is no host here).
    const url = new URL(`//${path.startsWith('/') ? path : `/${path}`}`, 'relative://');
    return keepQuery ? `${url.pathname}${url.search}${url.hash}` : url.pathname;
  } catch {
    return null;
  }
}

/** `_headers`: blocks of a URL pattern line and indented `Name: value` or `! Name` lines. */
export function parseHeadersFile(text: string, file = '_headers'): ParsedRules<HeaderRule> {
  const lines = text.split('\n');
  const rules: HeaderRule[] = [];
  const warnings: string[] = [];
  const warn = (line: number | null, why: string) =>
    warnings.push(`${file}${line ? `:${line}` : ''}: ${why}`);
  let current: { rule: HeaderRule; set: Map<string, string>; line: number } | null = null;
  let skipping = false;
  const close = () => {
    if (!current) return;
    if (current.set.size === 0 && current.rule.unset.length === 0) {
      warn(current.line, `${current.rule.path} sets no header; skipped`);
    } else {
      rules.push({ ...current.rule, set: [...current.set] });
    }
    current = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.length > MAX_LINE_LENGTH) {
      warn(n, `longer than ${MAX_LINE_LENGTH} characters; ignored`);
      continue;
    }
    if (line.startsWith('/') || /^[^\s]+:\/\//.test(line)) {
      skipping = false;
      if (rules.length + (current ? 1 : 0) >= MAX_HEADER_RULES) {
        close();
        warn(
          n,
          `at most ${MAX_HEADER_RULES} rules are read; the remaining ${lines.length - i} lines are skipped`,
        );
        break;
      }
      close();
      const url = normaliseRuleUrl(line, { relativeOnly: false, keepQuery: false });
      const why = 'why' in url ? url.why : wildcardProblem(url.url);
      if (why) {
        warn(n, `${why}; the rule is skipped`);
        skipping = true;
        continue;
      }
      current = { rule: { path: (url as { url: string }).url, set: [], unset: [] }, set: new Map(), line: n };
      continue;
    }
    if (skipping) continue;
    if (!line.includes(':')) {
      if (current && line.startsWith('! ')) {
        const name = line.slice(2).trim();
        if (FIELD_NAME.test(name)) current.rule.unset.push(name);
        else warn(n, `${JSON.stringify(name)} is no header name`);
      } else {
        warn(
          n,
          current
            ? 'expected a header as "Name: value", or "! Name" to detach one'
            : 'expected a URL path beginning with a forward slash',
        );
      }
      continue;
    }
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name.includes(' ')) warn(n, 'a header name cannot include spaces');
    else if (name === '') warn(n, 'no header name before the colon');
    else if (value === '') warn(n, `no value for ${name}`);
    else if (!current) warn(n, `a URL path must come before the header ${name}`);
    // Cloudflare would take these and fail the request; refusing them here keeps every answer valid.
    else if (!FIELD_NAME.test(name)) warn(n, `${JSON.stringify(name)} is no header name`);
    else if (/[\0\r\n]/.test(value)) warn(n, `the value of ${name} holds a control character`);
    else {
      const before = current.set.get(name);
      current.set.set(name, before === undefined ? value : `${before}, ${value}`);
    }
  }
  close();
  return { rules, warnings };
}

/** At runtime `*` is the `:splat` placeholder, so a pattern may carry only one of either. */
function wildcardProblem(path: string): string | null {
  const stars = path.split('*').length - 1;
  if (stars > 1) return 'only one * is allowed in a rule (name the other parts with :placeholders)';
  if (stars === 1 && /:splat(?!\w)/.test(path)) return 'a rule cannot hold both * and :splat';
  return null;
}

/** `_redirects`: one `source destination [status]` a line. */
export function parseRedirectsFile(
  text: string,
  options: { htmlHandling?: AssetsConfig['html_handling']; file?: string } = {},
): ParsedRules<RedirectRule> {
  const file = options.file ?? '_redirects';
  const lines = text.split('\n');
  const rules: RedirectRule[] = [];
  const warnings: string[] = [];
  const warn = (line: number, why: string) => warnings.push(`${file}:${line}: ${why}`);
  const seen = new Set<string>();
  let statics = 0;
  let dynamics = 0;
  let staticStillPossible = true;
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.length > MAX_LINE_LENGTH) {
      warn(n, `longer than ${MAX_LINE_LENGTH} characters; ignored`);
      continue;
    }
    // A `#` after white space starts a comment; one inside a destination is its fragment.
    const tokens = line.replace(/\s+#.*$/, '').split(/\s+/);
    if (tokens.length < 2 || tokens.length > 3) {
      warn(n, `expected "source destination [status]", got ${tokens.length} word(s); ignored`);
      continue;
    }
    const [fromToken, toToken, statusToken = '302'] = tokens as [string, string, string?];
    const from = normaliseRuleUrl(fromToken, { relativeOnly: true, keepQuery: false });
    if ('why' in from) {
      warn(n, `${from.why}; ignored`);
      continue;
    }
    if (staticStillPossible && !isDynamic(from.url)) {
      if (++statics > MAX_STATIC_REDIRECTS) {
        warn(n, `at most ${MAX_STATIC_REDIRECTS} static redirects are read; ignored`);
        continue;
      }
    } else {
      staticStillPossible = false;
      if (++dynamics > MAX_DYNAMIC_REDIRECTS) {
        warn(
          n,
          `at most ${MAX_DYNAMIC_REDIRECTS} dynamic redirects are read; the remaining ${lines.length - i} lines are skipped`,
        );
        break;
      }
    }
    const to = normaliseRuleUrl(toToken, { relativeOnly: false, keepQuery: true });
    if ('why' in to) {
      warn(n, `${to.why}; ignored`);
      continue;
    }
    const status = Number(statusToken);
    if (!REDIRECT_STATUSES.includes(status)) {
      warn(n, `the status must be 200, 301, 302 (the default), 303, 307 or 308, not ${statusToken}; ignored`);
      continue;
    }
    const relative = !ABSOLUTE.test(to.url);
    const toIndex = /\/index(\.html)?$/.test(to.url);
    if (
      relative &&
      toIndex &&
      (from.url.endsWith('/*') || (from.url.endsWith('/') && options.htmlHandling !== 'none'))
    ) {
      warn(
        n,
        'this rule would loop (html_handling redirects /index.html back to the folder); ignored. For a single-page application set "not_found_handling": "single-page-application"',
      );
      continue;
    }
    if (seen.has(from.url)) {
      warn(n, `a rule for ${from.url} came earlier; ignored`);
      continue;
    }
    seen.add(from.url);
    if (status === 200 && !relative) {
      warn(n, `a 200 (rewrite) rule can only point at a path of this site, not ${to.url}; ignored`);
      continue;
    }
    rules.push({ from: from.url, to: to.url, status, line: n });
  }
  return { rules, warnings };
}

function isDynamic(path: string): boolean {
  return path.includes('*') || PLACEHOLDER.test(path);
}

/**
 * A rule pattern as a regular expression source: `*` captures anything as `splat`, `:name` one
 * path segment (in the host, one label); everything else is literal. Null when two parts would
 * capture under one name (the rule cannot match; Cloudflare drops it too).
 */
export function patternSource(pattern: string): string | null {
  const hostEnd = pattern.startsWith('https://') ? pattern.indexOf('/', 8) : 0;
  const names = new Set<string>();
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    const placeholder = c === ':' ? /^:([A-Za-z]\w*)/.exec(pattern.slice(i)) : null;
    let name: string | null = null;
    let capture = '';
    if (c === '*') {
      name = 'splat';
      capture = '.*';
    } else if (placeholder) {
      name = placeholder[1]!;
      capture = hostEnd < 0 || i < hostEnd ? '[^/.]+' : '[^/]+';
      i += name.length;
    }
    if (name === null) {
      out += c.replace(/[-/\\^$*+?.()|[\]{}]/g, '\\$&');
      continue;
    }
    if (names.has(name)) return null;
    names.add(name);
    out += `(?<${name}>${capture})`;
  }
  return `^${out}$`;
}

/** What the asset router reads as its `CONFIG` binding. */
export interface RouterConfig {
  html_handling: AssetsConfig['html_handling'];
  not_found_handling: AssetsConfig['not_found_handling'];
  /** Whether a `Sec-Fetch-Mode: navigate` request keeps `not_found_handling` in front of the worker. */
  navigation_prefers_assets: boolean;
  /** true: every request goes to the worker; a list: regex sources routed to the worker and to assets. */
  run_worker_first: boolean | { worker: string[]; assets: string[] };
  headers: { regex: string; host: boolean; set: [string, string][]; unset: string[] }[];
  redirects: {
    /** Rules without a splat or placeholder ahead of the first that has one: looked up by exact path. */
    static: Record<string, { status: number; to: string }>;
    dynamic: { regex: string; status: number; to: string }[];
  };
}

/** The date from which Workers prefer assets for navigation requests (workers-shared's flag table). */
const NAVIGATION_DEFAULT_FROM = '2025-04-01';

export function prefersAssetsForNavigation(compatibilityDate: string, flags: readonly string[]): boolean {
  if (flags.includes('assets_navigation_prefers_asset_serving')) return true;
  if (flags.includes('assets_navigation_has_no_effect')) return false;
  return compatibilityDate >= NAVIGATION_DEFAULT_FROM;
}

/** A `run_worker_first` pattern (only `*` is special) as a regex source. */
export function routeSource(pattern: string): string {
  return `^${pattern
    .split('*')
    .map((part) => part.replace(/[-/\\^$*+?.()|[\]{}]/g, '\\$&'))
    .join('.*')}$`;
}

/** The router's configuration for one deployment, from its manifest's assets and its assets.json rules. */
export function routerConfig(
  assets: AssetsConfig,
  compatibility: { date: string; flags: readonly string[] },
  rules: { headers?: HeaderRule[]; redirects?: RedirectRule[] },
): RouterConfig {
  const routes = assets.run_worker_first ?? false;
  const headers: RouterConfig['headers'] = [];
  for (const rule of rules.headers ?? []) {
    const regex = patternSource(rule.path);
    if (regex)
      headers.push({ regex, host: rule.path.startsWith('https://'), set: rule.set, unset: rule.unset });
  }
  const redirects: RouterConfig['redirects'] = { static: {}, dynamic: [] };
  for (const rule of rules.redirects ?? []) {
    if (redirects.dynamic.length === 0 && !isDynamic(rule.from)) {
      if (!Object.hasOwn(redirects.static, rule.from)) {
        redirects.static[rule.from] = { status: rule.status, to: rule.to };
      }
      continue;
    }
    const regex = patternSource(rule.from);
    if (regex) redirects.dynamic.push({ regex, status: rule.status, to: rule.to });
  }
  return {
    html_handling: assets.html_handling,
    not_found_handling: assets.not_found_handling,
    navigation_prefers_assets: prefersAssetsForNavigation(compatibility.date, compatibility.flags),
    run_worker_first: Array.isArray(routes)
      ? {
          worker: routes.filter((r) => !r.startsWith('!')).map(routeSource),
          assets: routes.filter((r) => r.startsWith('!')).map((r) => routeSource(r.slice(1))),
        }
      : routes,
    headers,
    redirects,
  };
}

/** Rules whose pattern can never match (two captures of one name): a warning each, as the publish reports them. */
export function unmatchableRules(headers: HeaderRule[], redirects: RedirectRule[]): string[] {
  return [
    ...headers
      .filter((r) => patternSource(r.path) === null)
      .map((r) => `_headers: ${r.path} names one placeholder twice; the rule can never match and is skipped`),
    ...redirects
      .filter((r) => patternSource(r.from) === null)
      .map(
        (r) =>
          `_redirects:${r.line}: ${r.from} names one placeholder twice; the rule can never match and is skipped`,
      ),
  ];
}
