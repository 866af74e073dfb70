// The operator's allowance of private addresses for workers (docs/runtime.md "Outbound requests"),
// as the node hands it to `cell serve` and the runtime reads it back. svc validates the setting
// with the same parser, so an entry the node accepts is one the runtime understands.

import { isIP } from 'node:net';
import { isApplicationName } from '../registry/names.ts';

/** The variable through which a node hands the setting's entries to `cell serve`. */
export const EGRESS_ALLOW_VARIABLE = 'CELL_EGRESS_ALLOW';

/** One entry of the setting: a range or host, and the application it is for (null: all). */
export interface EgressEntry {
  application: string | null;
  /** A CIDR range, a bare IP address, or a host name. */
  target: string;
}

const HOST_NAME =
  /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;

/** Parses `[app=]cidr|address|host`; a string says what is wrong. */
export function parseEgressEntry(text: string): EgressEntry | string {
  const at = text.indexOf('=');
  const application = at === -1 ? null : text.slice(0, at).trim();
  const target = (at === -1 ? text : text.slice(at + 1)).trim();
  if (application !== null && !isApplicationName(application))
    return `${JSON.stringify(application)} is not an application name`;
  const [address, len] = target.split('/');
  if (len !== undefined) {
    const bits = isIP(address ?? '') === 4 ? 32 : isIP(address ?? '') === 6 ? 128 : 0;
    if (bits === 0 || !/^\d{1,3}$/.test(len) || Number(len) > bits)
      return `${JSON.stringify(target)} is not a CIDR range (such as 192.168.1.0/24 or fd00::/8)`;
  } else if (isIP(target) === 0 && !HOST_NAME.test(target)) {
    return `${JSON.stringify(target)} is not an IP address, a CIDR range or a host name`;
  }
  return { application, target };
}

/**
 * The setting's entries as the node hands them to every process (all applications', one a line):
 * the runtime keeps those for its own application.
 */
export function egressEnvironment(entries: readonly string[]): Record<string, string> {
  return entries.length === 0 ? {} : { [EGRESS_ALLOW_VARIABLE]: entries.join('\n') };
}

/** The entries that apply to `application`, read back from the variable; malformed ones are skipped. */
export function egressEntriesFor(env: NodeJS.ProcessEnv, application: string): string[] {
  const targets: string[] = [];
  for (const line of (env[EGRESS_ALLOW_VARIABLE] ?? '').split('\n')) {
    if (line.trim() === '') continue;
    const entry = parseEgressEntry(line);
    if (typeof entry === 'string') continue;
    if (entry.application === null || entry.application === application) targets.push(entry.target);
  }
  return targets;
}
