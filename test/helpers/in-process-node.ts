// For unit tests of the node API: a real node API server (buildServer, so the real guard and
// error handler) on loopback over the in-memory store test double, with keys to sign as
// (`signerFor` also signs for the integration tests' real nodes).

import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { Role } from '../../src/auth/caller.ts';
import { generateSigningKey, type SigningKeyPair } from '../../src/auth/ed25519.ts';
import type { TrustedOperator } from '../../src/auth/records.ts';
import { signToken } from '../../src/auth/token.ts';
import { defaultSettings } from '../../src/config/settings.ts';
import type { NodeContext } from '../../src/node/context.ts';
import { buildServer, type RoutePlugin } from '../../src/node/server.ts';
import { keys } from '../../src/registry/keys.ts';
import { putJson, type Store } from '../../src/store/store.ts';
import { MemoryStore } from './memory-store.ts';

export interface Signer {
  id: string;
  pair: SigningKeyPair;
  /** A fresh `authorization` header value (tokens are single use). */
  bearer(): Promise<string>;
}

/** An answer as the tests read it: the JSON body is read freely by each assertion. */
export interface TestResponse {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: tests read answer bodies field by field
  body: any;
  contentType: string | null;
}

export interface TestNode {
  app: FastifyInstance;
  ctx: NodeContext;
  store: MemoryStore;
  url: string;
  /** Registers an operator key straight in the store, as the bucket ceremony would. */
  operator(id: string, role: Role, applications: string[], extra?: Partial<TrustedOperator>): Promise<Signer>;
  /** Publishes a node key straight in the store. */
  node(id: string): Promise<Signer>;
  call(
    method: string,
    path: string,
    options?: { signer?: Signer; authorization?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<TestResponse>;
  close(): Promise<void>;
}

export function signerFor(id: string, pair: SigningKeyPair = generateSigningKey()): Signer {
  return { id, pair, bearer: async () => `Bearer ${await signToken({ id, privateKey: pair.privateKey })}` };
}

/** Writes the signer's operator record straight into the bucket, as a bucket-path registration does. */
export async function trustOperator(
  store: Store,
  signer: Signer,
  role: Role = 'admin',
  applications: string[] = ['*'],
  extra: Partial<TrustedOperator> = {},
): Promise<Signer> {
  const record: TrustedOperator = {
    v: 1,
    id: signer.id,
    publicKey: signer.pair.publicJwk,
    role,
    applications,
    registeredAt: new Date().toISOString(),
    registeredBy: 'bucket',
    ...extra,
  };
  await putJson(store, keys.operator(signer.id), record);
  return signer;
}

export async function startTestNode(
  plugins: RoutePlugin[],
  configure: (ctx: NodeContext) => void = () => {},
): Promise<TestNode> {
  const store = new MemoryStore();
  const settings = defaultSettings();
  const ctx: NodeContext = {
    settings,
    store,
    nodeId: 'node-self',
    version: '0.0.0-test',
    log: pino({ level: 'silent' }),
  };
  configure(ctx);
  const app = await buildServer(ctx, plugins);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return {
    app,
    ctx,
    store,
    url,
    operator: (id, role, applications, extra = {}) =>
      trustOperator(store, signerFor(id), role, applications, extra),
    async node(id) {
      const signer = signerFor(id);
      await store.putJson(keys.nodeKey(id), { v: 1, id, publicKey: signer.pair.publicJwk, publishedAt: '' });
      return signer;
    },
    async call(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      if (options.signer) headers.authorization = await options.signer.bearer();
      if (options.authorization !== undefined) headers.authorization = options.authorization;
      let body: string | undefined;
      if (options.body !== undefined) {
        body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
        headers['content-type'] ??= 'application/json';
      }
      const response = await fetch(`${url}${path}`, { method, headers, body });
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = text;
      }
      return { status: response.status, body: parsed, contentType: response.headers.get('content-type') };
    },
    close: () => app.close(),
  };
}
