// Workload trust policies (docs/deploys.md "Trust policies"; docs/cli.md "svc trust"): which OIDC
// issuers, audiences and subjects may deploy one application. One record per application at
// `_svc/apps/<name>/trust.json` (keys.trustPolicy), written by `svc trust` straight to the bucket
// with conditional writes and read by the node for every workload token it is shown.
//
// A policy is a list of entries, one per (issuer, audience) pair, each with subject patterns in
// which `*` matches any run of characters (including none). The policy may exist before the
// application does: a CI workflow's first deploy creates the application it is trusted for.

import { Problem } from '../problem.ts';
import { getJson, parseJsonBody, type Store } from '../store/store.ts';
import { updateJson } from '../store/update.ts';
import { keys } from './keys.ts';

/** Audience a workload token must carry when `--audience` is not given. */
export const DEFAULT_AUDIENCE = 'svc';
/** Bounds that keep one policy small enough to read on every workload request. */
export const MAX_TRUST_ENTRIES = 64;
export const MAX_SUBJECTS_PER_ENTRY = 256;
export const MAX_PATTERN_CHARS = 512;
export const MAX_ISSUER_CHARS = 512;

export interface TrustEntry {
  /** Issuer URL exactly as tokens carry it in `iss`. */
  issuer: string;
  /** The `aud` a token must carry (one of its audiences). */
  audience: string;
  /** Subject patterns; `*` matches any run of characters. Sorted, unique. */
  subjects: string[];
}

export interface TrustPolicy {
  v: 1;
  application: string;
  /** Sorted by issuer, then audience. */
  entries: TrustEntry[];
  updatedAt: string;
}

/** The policy of one application, or null when it trusts no workload. */
export async function readTrustPolicy(store: Store, application: string): Promise<TrustPolicy | null> {
  const found = await getJson<unknown>(store, keys.trustPolicy(application));
  return found ? normalizePolicy(found.value, application) : null;
}

/**
 * An issuer URL as `svc trust` accepts it: `https://` (or `http://` on a loopback host, for a
 * local test issuer), no query, fragment or credentials. It is kept exactly as given, because
 * tokens are matched on `iss` byte for byte.
 */
export function checkIssuer(value: unknown): string {
  const bad = (why: string) =>
    new Problem('invalid-input', 'Invalid issuer', `${JSON.stringify(value)} ${why}`);
  if (typeof value !== 'string' || value === '') throw bad('is not an issuer URL');
  if (value.length > MAX_ISSUER_CHARS) throw bad(`is over ${MAX_ISSUER_CHARS} characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw bad(
      'is not a URL; give the issuer as tokens carry it in iss, e.g. https://token.actions.githubusercontent.com',
    );
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
    throw bad('must be an https:// URL (http:// is accepted for loopback hosts only)');
  }
  if (url.search || url.hash || url.username || url.password || value.includes('?') || value.includes('#')) {
    throw bad('may not carry a query, fragment or credentials');
  }
  return value;
}

export function isLoopbackHost(hostname: string): boolean {
  return (
    hostname === 'localhost' ||
    hostname === '[::1]' ||
    hostname === '::1' ||
    /^127\.\d+\.\d+\.\d+$/.test(hostname)
  );
}

/** A subject pattern: non-empty, at most 512 characters, no control character. */
export function checkSubjectPattern(value: unknown): string {
  if (
    typeof value !== 'string' ||
    value === '' ||
    value.length > MAX_PATTERN_CHARS ||
    /\p{Cc}/u.test(value)
  ) {
    throw new Problem(
      'invalid-input',
      'Invalid subject',
      `${JSON.stringify(value)} is not a subject pattern: 1-${MAX_PATTERN_CHARS} characters, no control character; * matches any run`,
    );
  }
  return value;
}

export function checkAudience(value: unknown): string {
  if (
    typeof value !== 'string' ||
    value === '' ||
    value.length > MAX_PATTERN_CHARS ||
    /\p{Cc}/u.test(value)
  ) {
    throw new Problem('invalid-input', 'Invalid audience', `${JSON.stringify(value)} is not an audience`);
  }
  return value;
}

/** Whether a subject pattern (`*` = any run of characters) matches a subject exactly. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return pattern === subject;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (subject.length < first.length + last.length) return false;
  if (!subject.startsWith(first) || !subject.endsWith(last)) return false;
  // Greedy-free scan: each middle piece at its earliest place after the previous one.
  let at = first.length;
  const end = subject.length - last.length;
  for (const piece of parts.slice(1, -1)) {
    const found = subject.indexOf(piece, at);
    if (found < 0 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return true;
}

/** What a policy says of one verified token. */
export type TrustVerdict = 'admitted' | 'issuer-unknown' | 'not-admitted';

export function judgeToken(
  policy: TrustPolicy | null,
  token: { issuer: string; audiences: string[]; subject: string },
): TrustVerdict {
  const entries = policy?.entries.filter((entry) => entry.issuer === token.issuer) ?? [];
  if (entries.length === 0) return 'issuer-unknown';
  const admitted = entries.some(
    (entry) =>
      token.audiences.includes(entry.audience) &&
      entry.subjects.some((pattern) => subjectMatches(pattern, token.subject)),
  );
  return admitted ? 'admitted' : 'not-admitted';
}

/** Whether the policy names this issuer at all (checked on the unsigned `iss` before any fetch). */
export function namesIssuer(policy: TrustPolicy | null, issuer: string): boolean {
  return !!policy?.entries.some((entry) => entry.issuer === issuer);
}

export interface TrustChange {
  issuer: string;
  audience: string;
  subjects: string[];
}

/** `svc trust set`: the subjects of this issuer and audience become exactly these. */
export async function setTrustedSubjects(
  store: Store,
  application: string,
  change: TrustChange,
): Promise<TrustPolicy> {
  const checked = checkChange(change);
  return updatePolicy(store, application, (entries) => [
    ...entries.filter((entry) => !(entry.issuer === checked.issuer && entry.audience === checked.audience)),
    { issuer: checked.issuer, audience: checked.audience, subjects: uniqueSorted(checked.subjects) },
  ]);
}

/** `svc trust add`: adds subjects, keeping those already trusted; creates the entry or policy. */
export async function addTrustedSubjects(
  store: Store,
  application: string,
  change: TrustChange,
): Promise<TrustPolicy> {
  const checked = checkChange(change);
  return updatePolicy(store, application, (entries) => {
    const existing = entries.find(
      (entry) => entry.issuer === checked.issuer && entry.audience === checked.audience,
    );
    const subjects = uniqueSorted([...(existing?.subjects ?? []), ...checked.subjects]);
    return [
      ...entries.filter((entry) => entry !== existing),
      { issuer: checked.issuer, audience: checked.audience, subjects },
    ];
  });
}

/**
 * `svc trust remove`: stops trusting an issuer (every audience of it). Answers the policy left
 * (null when none is left and the record was deleted) and whether the issuer was trusted.
 */
export async function removeTrustedIssuer(
  store: Store,
  application: string,
  issuer: string,
): Promise<{ policy: TrustPolicy | null; removed: boolean }> {
  const updated = await updateJson<TrustPolicy>(
    store,
    keys.trustPolicy(application),
    (current) => {
      if (!current) return null;
      const kept = current.value.entries.filter((entry) => entry.issuer !== issuer);
      if (kept.length === current.value.entries.length) return null;
      if (kept.length === 0) return { delete: true };
      return { put: { ...current.value, entries: kept, updatedAt: new Date().toISOString() } };
    },
    { parse: (body) => normalizePolicy(parseJsonBody(body), application) },
  );
  return { policy: updated.value, removed: updated.changed };
}

async function updatePolicy(
  store: Store,
  application: string,
  change: (entries: TrustEntry[]) => TrustEntry[],
): Promise<TrustPolicy> {
  const updated = await updateJson<TrustPolicy>(
    store,
    keys.trustPolicy(application),
    (current) => {
      const entries = sortEntries(change(current?.value.entries ?? []));
      if (entries.length > MAX_TRUST_ENTRIES) {
        throw new Problem(
          'invalid-input',
          'Too many trusted issuers',
          `a trust policy holds at most ${MAX_TRUST_ENTRIES} issuer and audience pairs; remove one first`,
        );
      }
      return { put: { v: 1, application, entries, updatedAt: new Date().toISOString() } };
    },
    { parse: (body) => normalizePolicy(parseJsonBody(body), application) },
  );
  return updated.value!;
}

function checkChange(change: TrustChange): TrustChange {
  const subjects = change.subjects.map(checkSubjectPattern);
  if (subjects.length === 0) {
    throw new Problem('invalid-input', 'Invalid subject', 'give at least one --subject');
  }
  if (uniqueSorted(subjects).length > MAX_SUBJECTS_PER_ENTRY) {
    throw new Problem(
      'invalid-input',
      'Too many subjects',
      `an issuer and audience pair holds at most ${MAX_SUBJECTS_PER_ENTRY} subject patterns`,
    );
  }
  return { issuer: checkIssuer(change.issuer), audience: checkAudience(change.audience), subjects };
}

/** A stored policy read defensively: entries that do not hold up are dropped, never trusted. */
function normalizePolicy(value: unknown, application: string): TrustPolicy {
  const record = (value ?? {}) as Partial<TrustPolicy>;
  const entries: TrustEntry[] = [];
  for (const entry of Array.isArray(record.entries) ? record.entries : []) {
    if (!entry || typeof entry.issuer !== 'string' || typeof entry.audience !== 'string') continue;
    if (!Array.isArray(entry.subjects)) continue;
    const subjects = entry.subjects.filter((s: unknown): s is string => typeof s === 'string' && s !== '');
    entries.push({ issuer: entry.issuer, audience: entry.audience, subjects });
  }
  return {
    v: 1,
    application,
    entries: sortEntries(entries),
    updatedAt: typeof record.updatedAt === 'string' ? record.updatedAt : '',
  };
}

function sortEntries(entries: TrustEntry[]): TrustEntry[] {
  return [...entries].sort((a, b) =>
    a.issuer === b.issuer ? compare(a.audience, b.audience) : compare(a.issuer, b.issuer),
  );
}

function uniqueSorted(values: string[]): string[] {
  return [...new Set(values)].sort(compare);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
