// The deploy metadata document carried in `x-svc-deploy` (docs/deploys.md "The metadata header" and
// "Intake"): unpadded base64url of canonical JSON, at most 8,192
// characters. Canonical means the decoded text is exactly what `JSON.stringify(JSON.parse(text))`
// gives back: no whitespace, no duplicate key, escapes written the one way JSON.stringify writes
// them, numbers in their shortest form, key order kept. `svc deploy` emits that form
// (`encodeDeployMetadata`). Every refusal is `invalid-input`, title "Malformed request".
//
// This parser faces the network: it never throws anything but that one Problem.

import { Problem } from '../../problem.ts';
import type { DeploySource, Replicas } from '../../registry/records.ts';

// The source is recorded with the deploy and the deployment (src/registry/); svc deploy builds it.
export type { DeploySource };

/** docs/deploys.md "The metadata header": the header's length in characters. */
export const MAX_METADATA_CHARS = 8192;

const BASE64URL = /^[A-Za-z0-9_-]+$/;
const SOURCE_FIELDS = ['provider', 'repo', 'ref', 'commit'] as const;

/** What a deploy asks for besides its artifact. Absent or null placement members preserve. */
export interface DeployMetadata {
  replicas?: Replicas | null;
  nodeSelector?: Record<string, string> | null;
  source?: DeploySource;
}

/** The refusal for every malformed or non-canonical header. */
export function malformed(detail: string): Problem {
  return new Problem('invalid-input', 'Malformed request', detail);
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Parses the `x-svc-deploy` header. An absent header reads as the empty document `{}` (nothing
 * asked); anything present must be the canonical form.
 */
export function parseDeployMetadata(header: string | string[] | undefined): DeployMetadata {
  if (header === undefined) return {};
  if (Array.isArray(header)) throw malformed('send one x-svc-deploy header, not several');
  if (header.length > MAX_METADATA_CHARS) {
    throw malformed(`x-svc-deploy is ${header.length} characters; at most ${MAX_METADATA_CHARS}`);
  }
  if (!BASE64URL.test(header)) {
    throw malformed('x-svc-deploy must be unpadded base64url (A-Z a-z 0-9 _ -)');
  }
  const bytes = Buffer.from(header, 'base64url');
  // Buffer.from tolerates a dangling character and non-zero trailing bits: insist on the one
  // encoding of these bytes.
  if (bytes.toString('base64url') !== header) {
    throw malformed('x-svc-deploy is not the canonical base64url of its bytes');
  }
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw malformed('x-svc-deploy does not decode to UTF-8 text');
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw malformed('x-svc-deploy does not decode to JSON');
  }
  if (JSON.stringify(document) !== text) {
    throw malformed(
      'x-svc-deploy is not canonical JSON: no whitespace, no duplicate key, keys in the order JSON.stringify keeps, escapes and numbers as JSON.stringify writes them',
    );
  }
  return checkDocument(document);
}

/** The checks on the decoded document; pure, for the parser and for `svc deploy` before sending. */
export function checkDocument(document: unknown): DeployMetadata {
  if (!isObject(document)) throw malformed('the deploy metadata must be a JSON object');
  for (const refused of ['application', 'oidc']) {
    if (Object.hasOwn(document, refused)) {
      throw malformed(`the deploy metadata may not carry "${refused}"`);
    }
  }
  const metadata: DeployMetadata = {};
  if (Object.hasOwn(document, 'replicas')) metadata.replicas = checkReplicas(document.replicas);
  if (Object.hasOwn(document, 'nodeSelector')) metadata.nodeSelector = checkSelector(document.nodeSelector);
  if (Object.hasOwn(document, 'source')) metadata.source = checkSource(document.source);
  return metadata;
}

function checkReplicas(value: unknown): Replicas | null {
  if (value === null || value === 'all') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1) return value;
  throw malformed(`"replicas" must be "all", a whole number >= 1, or null; got ${describe(value)}`);
}

function checkSelector(value: unknown): Record<string, string> | null {
  if (value === null) return null;
  if (!isObject(value) || Object.values(value).some((entry) => typeof entry !== 'string')) {
    throw malformed('"nodeSelector" must be an object of string values, or null');
  }
  // A plain copy: a key such as "__proto__" stays a key, never a prototype.
  const selector: Record<string, string> = Object.create(null);
  for (const [key, entry] of Object.entries(value)) selector[key] = entry as string;
  return { ...selector };
}

function checkSource(value: unknown): DeploySource {
  if (!isObject(value)) throw malformed('"source" must be a JSON object {provider, repo, ref, commit}');
  if (Object.hasOwn(value, 'oidcSub')) throw malformed('the deploy metadata may not carry "source.oidcSub"');
  for (const field of SOURCE_FIELDS) {
    const entry = value[field];
    if (typeof entry !== 'string' || entry === '') {
      throw malformed(
        `"source.${field}" must be a non-empty string; source needs provider, repo, ref and commit`,
      );
    }
  }
  return {
    provider: value.provider as string,
    repo: value.repo as string,
    ref: value.ref as string,
    commit: value.commit as string,
  };
}

/**
 * The header value for a metadata document: canonical JSON (JSON.stringify keeps insertion order
 * and re-parses to the same order), unpadded base64url. Refuses what the node would refuse.
 */
export function encodeDeployMetadata(metadata: DeployMetadata): string {
  const document: Record<string, unknown> = {};
  if (metadata.replicas !== undefined) document.replicas = metadata.replicas;
  if (metadata.nodeSelector !== undefined) document.nodeSelector = metadata.nodeSelector;
  if (metadata.source !== undefined) document.source = metadata.source;
  checkDocument(document);
  const header = Buffer.from(JSON.stringify(document), 'utf8').toString('base64url');
  if (header.length > MAX_METADATA_CHARS) {
    throw malformed(
      `the deploy metadata encodes to ${header.length} characters; at most ${MAX_METADATA_CHARS}`,
    );
  }
  return header;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}
