// Outbound requests from a worker (docs/runtime.md "Outbound requests"). workerd's network service
// refuses every address that is not public (loopback, RFC 1918, link-local, unique-local, ...)
// and judges the address a name resolves to, but the worker sees only "internal error;
// reference = ...". Two parts here: the ranges an operator allows (`--egress-allow`), which go into
// workerd's own allow list so that workerd stays the one that enforces; and a small module loaded
// ahead of the user's main module that wraps the global fetch, as wrangler's checked-fetch does,
// and turns that opaque error into a TypeError that says what was refused and why. Requests that
// fetch nothing do not touch it.

import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

/** The module that wraps the global fetch. */
export const EGRESS_MODULE = 'cell-egress.js';
/** The entry module that loads EGRESS_MODULE before the user's main module and re-exports it. */
export const EGRESS_ENTRY_MODULE = 'cell-egress-entry.js';

/**
 * Address arithmetic and classification, as JavaScript for the worker; the tests import it too,
 * so the worker's copy is the tested one.
 */
export const ADDRESS_SOURCE = `
export function parseV4(text) {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let n = 0n;
  for (const part of parts) {
    if (!/^\\d{1,3}$/.test(part) || Number(part) > 255) return null;
    n = (n << 8n) | BigInt(part);
  }
  return n;
}

export function parseV6(text) {
  let t = text.toLowerCase();
  const last = t.lastIndexOf(':');
  if (last === -1) return null;
  if (t.slice(last + 1).includes('.')) {
    const v4 = parseV4(t.slice(last + 1));
    if (v4 === null) return null;
    t = t.slice(0, last + 1) + (v4 >> 16n).toString(16) + ':' + (v4 & 0xffffn).toString(16);
  }
  const halves = t.split('::');
  if (halves.length > 2) return null;
  const groups = (half) => (half === '' ? [] : half.split(':'));
  const head = groups(halves[0]);
  const tail = halves.length === 2 ? groups(halves[1]) : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  let n = 0n;
  for (const group of [...head, ...Array(halves.length === 2 ? missing : 0).fill('0'), ...tail]) {
    if (!/^[0-9a-f]{1,4}$/.test(group)) return null;
    n = (n << 16n) | BigInt('0x' + group);
  }
  return n;
}

/** An IP literal (a URL's IPv6 host keeps its brackets) as { bits, n }, or null. */
export function parseAddress(text) {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const v4 = parseV4(bare);
  if (v4 !== null) return { bits: 32, n: v4 };
  const v6 = parseV6(bare);
  return v6 === null ? null : { bits: 128, n: v6 };
}

/** "a.b.c.d/len", "v6/len" or a bare address, as { bits, n, len }, or null. */
export function parseCidr(text) {
  const [address, len, extra] = text.split('/');
  const parsed = extra === undefined ? parseAddress(address) : null;
  if (!parsed) return null;
  if (len === undefined) return { ...parsed, len: parsed.bits };
  if (!/^\\d{1,3}$/.test(len) || Number(len) > parsed.bits) return null;
  return { ...parsed, len: Number(len) };
}

export function inCidr(address, cidr) {
  if (address.bits !== cidr.bits) return false;
  const shift = BigInt(cidr.bits - cidr.len);
  return address.n >> shift === cidr.n >> shift;
}

const KINDS = [
  ['0.0.0.0/8', 'unspecified'],
  ['127.0.0.0/8', 'loopback'],
  ['10.0.0.0/8', 'private (RFC 1918)'],
  ['172.16.0.0/12', 'private (RFC 1918)'],
  ['192.168.0.0/16', 'private (RFC 1918)'],
  ['169.254.0.0/16', 'link-local'],
  ['100.64.0.0/10', 'carrier-grade NAT (RFC 6598)'],
  ['192.0.0.0/24', 'IETF protocol'],
  ['198.18.0.0/15', 'benchmarking'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['fc00::/7', 'unique-local'],
  ['fe80::/10', 'link-local'],
  ['ff00::/8', 'multicast'],
].map(([cidr, kind]) => [parseCidr(cidr), kind]);
const MAPPED_V4 = parseCidr('::ffff:0:0/96');

/** What kind of address this is: 'public', or the range that makes it not public. */
export function addressKind(address) {
  if (inCidr(address, MAPPED_V4)) return addressKind({ bits: 32, n: address.n & 0xffffffffn });
  for (const [cidr, kind] of KINDS) if (inCidr(address, cidr)) return kind;
  return 'public';
}
`;

/** The fetch wrapper; ALLOWED is the parsed list of ranges the operator allows this application. */
const FETCH_WRAPPER_SOURCE = `
const SETTING = 'the egress-allow setting (svc sail --egress-allow), see "Outbound requests" in the runtime docs';

function targetOf(input) {
  try {
    return new URL(input instanceof Request ? input.url : String(input instanceof URL ? input.href : input));
  } catch {
    return null;
  }
}

// Only the error workerd gives a refused connection is explained: it says nothing else.
function explain(err, input) {
  if (!(err instanceof Error) || !err.message.startsWith('internal error')) return err;
  const url = targetOf(input);
  if (!url) return err;
  const host = url.hostname;
  // localhost names loopback (RFC 6761), so it is judged as 127.0.0.1.
  const localName = host === 'localhost' || host.endsWith('.localhost');
  const address = parseAddress(localName ? '127.0.0.1' : host);
  if (address) {
    const kind = addressKind(address);
    if (kind === 'public' || ALLOWED.some((cidr) => inCidr(address, cidr))) return err;
    return new TypeError(
      'fetch to ' + url.origin + ' was refused: ' + host + ' is a ' + kind + ' address, and workers ' +
        'on this fleet may reach only public addresses unless an operator allows the address with ' + SETTING,
    );
  }
  return new TypeError(
    'fetch to ' + url.origin + ' failed: ' + host + ' does not resolve, resolves only to addresses ' +
      'workers on this fleet may not reach (loopback, private, link-local, unique-local, carrier-grade NAT, ' +
      'unspecified), or refused the connection. Such addresses are reachable only where an operator ' +
      'allows them with ' + SETTING + ' (' + err.message + ')',
  );
}

const platformFetch = globalThis.fetch;
globalThis.fetch = new Proxy(platformFetch, {
  apply(target, self, args) {
    return Reflect.apply(target, self, args).then(undefined, (err) => {
      throw explain(err, args[0]);
    });
  },
});
`;

/** The wrapper module for a worker allowed `ranges` (CIDRs this module has checked). */
export function egressModuleSource(ranges: readonly string[]): string {
  return `${ADDRESS_SOURCE}
const ALLOWED = ${JSON.stringify(ranges)}.map(parseCidr);
${FETCH_WRAPPER_SOURCE}`;
}

/**
 * The entry module: EGRESS_MODULE is evaluated before the user's main module (imports run in
 * order), and every export of the main module is passed on. A main module without a default
 * export gets an empty handler, which answers as a worker without a fetch handler does.
 */
export function egressEntrySource(mainModule: string): string {
  const main = JSON.stringify(`./${mainModule}`);
  return `import ${JSON.stringify(`./${EGRESS_MODULE}`)};
import * as main from ${main};
export * from ${main};
export default main.default ?? {};
`;
}

/**
 * The CIDR ranges for workerd's allow list. A host name is resolved now, once per start of the
 * deployment, to all its addresses (a database whose address changes needs a restart);
 * a name that does not resolve is reported and left out.
 */
export async function egressRanges(
  targets: readonly string[],
  log: (line: string) => void,
  resolve: (name: string) => Promise<{ address: string; family: number }[]> = (name) =>
    lookup(name, { all: true }),
): Promise<string[]> {
  const ranges = new Set<string>();
  for (const target of targets) {
    if (target.includes('/')) ranges.add(target);
    else if (isIP(target) === 4) ranges.add(`${target}/32`);
    else if (isIP(target) === 6) ranges.add(`${target}/128`);
    else {
      try {
        for (const { address, family } of await resolve(target))
          ranges.add(`${address}/${family === 4 ? 32 : 128}`);
      } catch (err) {
        log(
          `cell: egress-allow names ${target}, which does not resolve (${(err as Error).message}): left out`,
        );
      }
    }
  }
  return [...ranges];
}
