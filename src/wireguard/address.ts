// The forms of the WireGuard settings (`--wg-address`, `--wg-endpoint`, `--wg-port`): pure
// parsers shared by the settings check and by the reading of other nodes' published records.

import { isIP } from 'node:net';

/** A tunnel address with its prefix length, e.g. `10.44.0.1/24` or `fd44::1/64`. */
export interface TunnelAddress {
  ip: string;
  family: 4 | 6;
  prefix: number;
}

/** Parses `ip/prefix`; answers a reason string when it is not one. */
export function parseTunnelAddress(text: string): TunnelAddress | string {
  const match = /^([^/\s]+)\/(\d{1,3})$/.exec(text);
  if (!match)
    return `expected an address with prefix length such as 10.44.0.1/24, got ${JSON.stringify(text)}`;
  const family = isIP(match[1]);
  if (family === 0) return `${JSON.stringify(match[1])} is not an IPv4 or IPv6 address`;
  const prefix = Number(match[2]);
  const max = family === 4 ? 32 : 128;
  if (prefix > max) return `prefix length ${prefix} is over ${max}`;
  return { ip: match[1], family: family as 4 | 6, prefix };
}

/** The one-host route of a tunnel address: what a peer's `AllowedIPs` names. */
export function hostRoute(address: TunnelAddress): string {
  return `${address.ip}/${address.family === 4 ? 32 : 128}`;
}

/** The address as a URL or `host:port` host (IPv6 in brackets). */
export function hostPart(address: TunnelAddress): string {
  return address.family === 6 ? `[${address.ip}]` : address.ip;
}

const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

function validPort(text: string): boolean {
  return /^\d{1,5}$/.test(text) && Number(text) >= 1 && Number(text) <= 65535;
}

/**
 * Parses `host:port` or a bare `host` (the port is then `defaultPort`) into `host:port`, IPv6 in
 * brackets; answers a reason string when it is neither.
 */
export function parseEndpoint(text: string, defaultPort: number): string | { endpoint: string } {
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  let host: string;
  let port: string | undefined;
  if (bracketed) {
    if (isIP(bracketed[1]) !== 6) return `${JSON.stringify(bracketed[1])} in brackets is not an IPv6 address`;
    host = `[${bracketed[1]}]`;
    port = bracketed[2];
  } else if (isIP(text) === 6) {
    return `an IPv6 endpoint goes in brackets with its port, such as [${text}]:${defaultPort}`;
  } else {
    const colon = text.lastIndexOf(':');
    host = colon < 0 ? text : text.slice(0, colon);
    port = colon < 0 ? undefined : text.slice(colon + 1);
    if (isIP(host) !== 4 && !HOSTNAME.test(host))
      return `expected host:port, got ${JSON.stringify(text)}: ${JSON.stringify(host)} is not a host name or IPv4 address`;
  }
  if (port !== undefined && !validPort(port))
    return `expected host:port, got ${JSON.stringify(text)}: the port must be 1-65535`;
  return { endpoint: `${host}:${port ?? defaultPort}` };
}
