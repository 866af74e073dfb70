// docs/applications.md "Custom domains" (custom host claim rule, the command line's DNS check) and
// docs/api.md "Custom domains". The claim rule is one pure function
// the node and the CLI both run. Claims are written referent-first: the application is checked,
// the claim record `_svc/domains/<host>.json` is created, then the host is listed on the
// application. Routing needs both halves (src/routing/input.ts), so a crash between the writes
// leaves a claim nothing routes to, and running the claim again finishes it.

import { invalidInput, Problem } from '../problem.ts';
import { getJson, isCasConflict, putJson, type Store } from '../store/store.ts';
import { updateJson } from '../store/update.ts';
import {
  applicationBlocked,
  applicationNotFound,
  readApplication,
  updateApplication,
} from './applications.ts';
import { markFleetChanged } from './changes.ts';
import { keys } from './keys.ts';
import type { ApplicationRecord, DomainClaim } from './records.ts';

/** docs/applications.md "Custom domains": domains per application. */
export const MAX_DOMAINS_PER_APPLICATION = 64;
const MAX_HOST_LENGTH = 253;
const MAX_LABEL_LENGTH = 63;
const LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

/** Why a host is no host to claim: the rule it breaks, in the words the refusal uses. */
export interface HostViolation {
  title: string;
  detail: string;
}

/**
 * The custom host claim rule. Answers the lowercased host, or the first rule it breaks. Checked
 * in the order an operator's typo is likeliest to hit, so the refusal names the real mistake.
 */
export function claimHostViolation(
  input: string,
  platformDomains: readonly string[],
): { host: string } | { violation: HostViolation } {
  // ASCII letters only: Unicode case mapping would turn look-alikes (the Kelvin sign) into ASCII.
  const host = input.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
  const bad = (rule: string) => ({
    violation: { title: 'Not a host to claim', detail: `"${input}": ${rule}` },
  });
  if (host === '') return bad('the host is empty');
  if (/^[a-z][a-z0-9+.-]*:\/\//.test(host))
    return bad('a host has no scheme; give the bare name, e.g. shop.example.com');
  if (/[/?#]/.test(host)) return bad('a host has no path, query or fragment');
  if (host.includes('*'))
    return bad('a host has no wildcard; claim the base with wildcard=1 (--wildcard) instead');
  if (host.includes(':') || host.includes('[')) return bad('a host has no port');
  if (host.includes('_')) return bad('a host has no underscore');
  if (host.endsWith('.')) return bad('a host has no trailing dot');
  if (host.length > MAX_HOST_LENGTH) return bad(`a host is at most ${MAX_HOST_LENGTH} characters`);
  const labels = host.split('.');
  if (labels.length < 2) return bad('a host is fully qualified: at least two labels, e.g. shop.example.com');
  for (const label of labels) {
    if (label === '') return bad('a host has no empty label');
    if (label.length > MAX_LABEL_LENGTH) return bad(`a label is at most ${MAX_LABEL_LENGTH} characters`);
    if (!LABEL.test(label)) {
      return bad(
        `label "${label}" must be letters, digits and inner hyphens, not starting or ending with a hyphen`,
      );
    }
  }
  if (/^[0-9]+$/.test(labels.at(-1)!)) return bad('the last label is not digits alone');
  for (const domain of platformDomains) {
    const apex = domain.toLowerCase();
    if (host === apex || host.endsWith(`.${apex}`)) {
      return {
        violation: {
          title: 'Host is under a platform domain',
          detail: `"${input}" is ${host === apex ? 'the platform domain' : 'under the platform domain'} ${apex}; applications answer there already as <name>.${apex}`,
        },
      };
    }
  }
  return { host };
}

/** The claim rule as a check: answers the lowercased host or throws `invalid-input` naming the rule. */
export function checkClaimHost(host: string, platformDomains: readonly string[]): string {
  const verdict = claimHostViolation(host, platformDomains);
  if ('violation' in verdict) throw invalidInput(verdict.violation.title, verdict.violation.detail);
  return verdict.host;
}

/** What both domain routes answer. */
export interface DomainAnswer {
  application: ApplicationRecord;
  host: string;
  platformHosts: string[];
}

/**
 * Where the application answers under the installation's own domains: `<name>.<domain>` for each
 * platform domain, empty when the node has none or the application serves nowhere by decision
 * (blocked or retired). A host is listed before the first process is ready: it is the name DNS
 * should point a claimed domain at.
 */
export function platformHostsOf(record: ApplicationRecord, platformDomains: readonly string[]): string[] {
  if (record.blocked || record.retired) return [];
  return platformDomains.map((domain) => `${record.name}.${domain.toLowerCase()}`);
}

/** A claim to make. `reaches` answers whether the caller's scope reaches an application name. */
export interface ClaimRequest {
  application: string;
  /** Already checked with `checkClaimHost`. */
  host: string;
  wildcard: boolean;
  by: string;
  reaches: (application: string) => boolean;
  platformDomains: readonly string[];
  now?: () => Date;
  /** For crash tests only: runs between the claim write and the listing on the application. */
  afterClaimWritten?: () => Promise<void> | void;
}

/**
 * Claims `host` for an application. Idempotent; a claim covering subdomains is never downgraded;
 * `application-blocked` for a blocked application; `reference-held` when the host, its
 * wildcard-claimed parent, or (for a wildcard claim) a host one label under it is held by another
 * application. Scope for `wildcard` (`<name>-*`) is the route's to check.
 */
export async function claimDomain(store: Store, request: ClaimRequest): Promise<DomainAnswer> {
  const { application: name, host, wildcard } = request;
  const now = request.now ?? (() => new Date());
  // 1. The referent's holder: the application must exist, not be blocked, and have room.
  const found = await readApplication(store, name);
  if (!found) throw applicationNotFound(name);
  if (found.record.blocked) throw applicationBlocked(name);
  if (!found.record.domains.includes(host)) checkRoom(found.record);
  await refuseConflicts(store, request);

  // 2. The claim record, created or upgraded conditionally.
  const created = await writeClaim(store, request, now);
  if (created.changed) {
    // Two claims written at once by different applications can each pass the check above; the
    // second look catches that, and the loser takes its claim back.
    try {
      await refuseConflicts(store, request);
    } catch (err) {
      await undoClaim(store, created);
      throw err;
    }
  }
  await request.afterClaimWritten?.();

  // 3. The host listed on the application: only now does routing see it.
  let application: ApplicationRecord;
  try {
    application = await updateApplication(
      store,
      name,
      (current) => {
        if (current.blocked) throw applicationBlocked(name);
        const listed = current.domains.includes(host);
        const listedWildcard = current.wildcardDomains.includes(host);
        const wantWildcard = wildcard || listedWildcard || created.claim.wildcard;
        if (listed && listedWildcard === wantWildcard) return null;
        if (!listed) checkRoom(current);
        return {
          ...current,
          domains: sortedWith(current.domains, host),
          wildcardDomains: wantWildcard ? sortedWith(current.wildcardDomains, host) : current.wildcardDomains,
        };
      },
      now,
    );
  } catch (err) {
    if (created.fresh) await undoClaim(store, created);
    throw err;
  }
  // An upgrade may change only the claim record, which no application write announced.
  if (created.changed) await markFleetChanged(store, `domain ${host}`);
  return { application, host, platformHosts: platformHostsOf(application, request.platformDomains) };
}

/**
 * Releases a host: unlisted from the application first (routing stops), then the claim record
 * deleted, so a crash between leaves an unrouted claim that running the release again removes.
 * Open for a blocked application. A host the application neither lists nor holds is `not-found`,
 * in the same words as a missing application.
 */
export async function releaseDomain(
  store: Store,
  name: string,
  host: string,
  platformDomains: readonly string[],
): Promise<DomainAnswer> {
  const found = await readApplication(store, name);
  const claim = await getJson<DomainClaim>(store, keys.domainClaim(host));
  const held = claim?.value.application === name;
  if (!found || (!held && !found.record.domains.includes(host))) throw domainNotFound(name, host);
  const application = await updateApplication(store, name, (current) =>
    current.domains.includes(host) || current.wildcardDomains.includes(host)
      ? {
          ...current,
          domains: current.domains.filter((h) => h !== host),
          wildcardDomains: current.wildcardDomains.filter((h) => h !== host),
        }
      : null,
  );
  if (claim && held) {
    // Deleted only while it is still this application's: someone may have claimed it meanwhile.
    await updateJson<DomainClaim>(store, keys.domainClaim(host), (current) =>
      current?.value.application === name ? { delete: true } : null,
    );
    await markFleetChanged(store, `domain ${host}`);
  }
  return { application, host, platformHosts: platformHostsOf(application, platformDomains) };
}

/** The `not-found` of the domain routes: same words for a missing application and an unheld host. */
export function domainNotFound(name: string, host: string): Problem {
  return new Problem('not-found', 'No such domain', `no application "${name}" holds the domain "${host}"`);
}

/** `app domain list`: the application's hosts, sorted, and those covering subdomains. */
export function domainsOf(record: ApplicationRecord): {
  application: string;
  domains: string[];
  wildcardDomains: string[];
} {
  return {
    application: record.name,
    domains: [...record.domains].sort(),
    wildcardDomains: [...record.wildcardDomains].sort(),
  };
}

// ---- Conflicts ----

/** Refuses when another application holds the host, its wildcard parent, or a child of a wildcard base. */
async function refuseConflicts(store: Store, request: ClaimRequest): Promise<void> {
  const { application: name, host } = request;
  const own = await getJson<DomainClaim>(store, keys.domainClaim(host));
  if (own && own.value.application !== name) throw referenceHeld(request, host, own.value.application);
  const parent = host.slice(host.indexOf('.') + 1);
  if (parent.includes('.')) {
    const above = await getJson<DomainClaim>(store, keys.domainClaim(parent));
    if (above?.value.wildcard && above.value.application !== name) {
      throw referenceHeld(
        request,
        parent,
        above.value.application,
        `its subdomains are claimed with "${parent}"`,
      );
    }
  }
  if (request.wildcard) {
    for (const child of await claimsOneLabelUnder(store, host)) {
      const below = await getJson<DomainClaim>(store, keys.domainClaim(child));
      if (below && below.value.application !== name) {
        throw referenceHeld(request, child, below.value.application, `"${child}" is one label under it`);
      }
    }
  }
}

/** Hosts claimed exactly one label under `base`; one listing, no reads. */
async function claimsOneLabelUnder(store: Store, base: string): Promise<string[]> {
  const listing = await store.list(keys.domainClaimsPrefix, { recursive: true });
  const suffix = `.${base}`;
  return listing.objects
    .map((object) => keys.hostOfClaim(object.key))
    .filter((host): host is string => host?.endsWith(suffix) === true)
    .filter((child) => !child.slice(0, -base.length - 1).includes('.'));
}

function referenceHeld(request: ClaimRequest, heldHost: string, holder: string, why?: string): Problem {
  const who = request.reaches(holder) ? `application "${holder}"` : 'another application';
  const what = heldHost === request.host ? `"${request.host}" is held by ${who}` : `${why}, held by ${who}`;
  return new Problem('reference-held', 'Domain is held by another application', what);
}

function checkRoom(record: ApplicationRecord): void {
  if (record.domains.length >= MAX_DOMAINS_PER_APPLICATION) {
    throw invalidInput(
      'Too many domains',
      `"${record.name}" already holds ${MAX_DOMAINS_PER_APPLICATION} domains, the most an application may; release one first`,
    );
  }
}

// ---- The claim record ----

interface WrittenClaim {
  claim: DomainClaim;
  etag: string;
  /** This call wrote the record (created or upgraded it). */
  changed: boolean;
  /** This call created the record. */
  fresh: boolean;
}

async function writeClaim(store: Store, request: ClaimRequest, now: () => Date): Promise<WrittenClaim> {
  const updated = await updateJson<DomainClaim>(store, keys.domainClaim(request.host), (current) => {
    if (!current) {
      return {
        put: {
          v: 1,
          host: request.host,
          application: request.application,
          wildcard: request.wildcard,
          claimedAt: now().toISOString(),
          by: request.by,
        },
      };
    }
    if (current.value.application !== request.application) {
      throw referenceHeld(request, request.host, current.value.application);
    }
    // Idempotent; only ever upgraded to cover subdomains, never downgraded.
    if (!request.wildcard || current.value.wildcard) return null;
    return { put: { ...current.value, wildcard: true } };
  });
  return {
    claim: updated.value!,
    etag: updated.etag!,
    changed: updated.changed,
    fresh: updated.created,
  };
}

/** Takes back what `writeClaim` did, unless someone has written the claim since. */
async function undoClaim(store: Store, written: WrittenClaim): Promise<void> {
  const key = keys.domainClaim(written.claim.host);
  try {
    if (written.fresh) await store.delete(key, { ifMatch: written.etag });
    else await putJson(store, key, { ...written.claim, wildcard: false }, { ifMatch: written.etag });
  } catch (err) {
    if (!isCasConflict(err)) throw err;
  }
}

function sortedWith(list: readonly string[], host: string): string[] {
  return list.includes(host) ? [...list] : [...list, host].sort();
}
