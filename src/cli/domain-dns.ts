// docs/cli.md "svc app" (domains): after a successful `app domain add` the CLI resolves the host and the
// platform hosts and reports whether DNS points here. It never fails the command. The resolver
// is injectable (`SVC_DNS_SERVER`) so tests point it at a DNS server they start.

import { randomBytes } from 'node:crypto';
import { Resolver } from 'node:dns/promises';

export type DnsVerdict = 'ok' | 'pending' | 'unknown';

export interface DnsCheck {
  verdict: DnsVerdict;
  /** One clause saying why, for the acknowledgement or the warning. */
  why: string;
}

/** The lookups the check needs; `node:dns` answers them in production. */
export interface DnsLookups {
  cname(host: string): Promise<string[]>;
  addresses(host: string): Promise<string[]>;
}

const LOOKUP_TIMEOUT_MS = 2000;

/** A resolver on `SVC_DNS_SERVER` (`host[:port]`, comma-separated) when set, else the system's. */
export function dnsLookups(servers: string | undefined = process.env.SVC_DNS_SERVER): DnsLookups {
  const resolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: 1 });
  const list = (servers ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (list.length > 0) resolver.setServers(list);
  return {
    cname: (host) => absentIsEmpty(resolver.resolveCname(host)),
    async addresses(host) {
      const [v4, v6] = await Promise.all([
        absentIsEmpty(resolver.resolve4(host)),
        absentIsEmpty(resolver.resolve6(host)),
      ]);
      return [...v4, ...v6];
    },
  };
}

/** "No such name" and "no such record" mean nothing is set up yet; every other failure is unknown. */
async function absentIsEmpty(lookup: Promise<string[]>): Promise<string[]> {
  try {
    return await lookup;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') return [];
    throw err;
  }
}

/** Whether `host` points where the application answers: a CNAME to, or an address of, a platform host. */
export async function checkDns(
  lookups: DnsLookups,
  host: string,
  platformHosts: readonly string[],
): Promise<DnsCheck> {
  if (platformHosts.length === 0) {
    return { verdict: 'unknown', why: 'the application answers at no platform host to compare with' };
  }
  const wanted = new Set(platformHosts.map(canonical));
  try {
    const cnames = (await lookups.cname(host)).map(canonical);
    const target = cnames.find((name) => wanted.has(name));
    if (target) return { verdict: 'ok', why: `${host} is a CNAME for ${target}` };
    const [mine, theirs] = await Promise.all([
      lookups.addresses(host),
      Promise.all(platformHosts.map((h) => lookups.addresses(h))).then((all) => new Set(all.flat())),
    ]);
    const shared = mine.find((address) => theirs.has(address));
    if (shared)
      return { verdict: 'ok', why: `${host} resolves to ${shared}, an address of ${platformHosts[0]}` };
    if (mine.length === 0 && cnames.length === 0)
      return { verdict: 'pending', why: `${host} does not resolve yet` };
    if (theirs.size === 0) {
      return {
        verdict: 'unknown',
        why: `${platformHosts.join(', ')} do not resolve yet, so nothing to compare with`,
      };
    }
    const where = cnames[0] ? `is a CNAME for ${cnames[0]}` : `resolves to ${mine.join(', ')}`;
    return { verdict: 'pending', why: `${host} ${where}, not here` };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return { verdict: 'unknown', why: `looking up ${host} failed (${code})` };
  }
}

/** A label nothing is deployed at, to check a wildcard record with. */
export function probeLabel(): string {
  return `svc-dns-check-${randomBytes(4).toString('hex')}`;
}

function canonical(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}
