// The identity records svc keeps in the bucket (docs/bucket-layout.md "`_svc/`: identity":
// `_svc/operators/<kid>.json`, `_svc/nodes/<kid>.json`). Only public key
// material is ever written there.

import { isOperatorId } from '../registry/names.ts';
import type { Role } from './caller.ts';
import { asPublicJwk, type PublicJwk } from './ed25519.ts';

/** A trusted operator key and its grant, at `_svc/operators/<id>.json`. */
export interface TrustedOperator {
  v: 1;
  id: string;
  publicKey: PublicJwk;
  role: Role;
  /** Scope patterns: `['*']`, exact application names, prefix globs such as `shop-*`. */
  applications: string[];
  /** The key this one was registered to replace (always the registering caller's own id). */
  supersedes?: string;
  registeredAt: string;
  /** Id of the operator whose token registered it, or `bucket` for the bucket ceremony. */
  registeredBy: string;
}

/** A node's public key, at `_svc/nodes/<id>.json`, written by the node at every start. */
export interface NodeKeyRecord {
  v: 1;
  id: string;
  publicKey: PublicJwk;
  publishedAt: string;
}

/** Reads a stored operator record; null when it is not one (never trusted then). */
export function asTrustedOperator(value: unknown, id: string): TrustedOperator | null {
  if (!value || typeof value !== 'object') return null;
  const record = value as Record<string, unknown>;
  const publicKey = asPublicJwk(record.publicKey);
  const { role, applications, supersedes } = record;
  if (record.id !== id || !publicKey) return null;
  if (role !== 'admin' && role !== 'operator') return null;
  if (!Array.isArray(applications) || !applications.every((item) => typeof item === 'string')) return null;
  if (supersedes !== undefined && !isOperatorId(supersedes)) return null;
  return {
    v: 1,
    id,
    publicKey,
    role,
    applications: applications as string[],
    ...(supersedes !== undefined ? { supersedes: supersedes as string } : {}),
    registeredAt: typeof record.registeredAt === 'string' ? record.registeredAt : '',
    registeredBy: typeof record.registeredBy === 'string' ? record.registeredBy : '',
  };
}

/** Reads a stored node key record; null when it is not one. */
export function asNodeKeyRecord(value: unknown, id: string): NodeKeyRecord | null {
  if (!value || typeof value !== 'object') return null;
  const record = value as Record<string, unknown>;
  const publicKey = asPublicJwk(record.publicKey);
  if (record.id !== id || !publicKey) return null;
  return {
    v: 1,
    id,
    publicKey,
    publishedAt: typeof record.publishedAt === 'string' ? record.publishedAt : '',
  };
}
