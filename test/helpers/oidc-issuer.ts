// A real OpenID issuer for tests: an HTTP server on loopback serving the discovery document and
// a JWKS of keys generated here (jose), and signing tokens with them. Nothing is mocked: the node
// fetches discovery and keys over HTTP exactly as it would from a CI provider.

import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { type CryptoKey, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';

export interface TestIssuer {
  /** The issuer URL, as tokens carry it in `iss`. */
  issuer: string;
  /** HTTP requests served, by path. */
  requests: string[];
  /** Signs a token with the issuer's key of that algorithm (default RS256). */
  sign(
    claims: JWTPayload,
    options?: { alg?: string; expiresInS?: number; iatOffsetS?: number },
  ): Promise<string>;
  /** Makes discovery answer 500 (true) or normally again (false). */
  failDiscovery(fail: boolean): void;
  close(): Promise<void>;
}

const ALGORITHMS = ['RS256', 'ES256', 'EdDSA', 'PS384', 'ES512'] as const;

export async function startTestIssuer(options: { issuerSuffix?: string } = {}): Promise<TestIssuer> {
  const keys = new Map<string, { privateKey: CryptoKey; kid: string }>();
  const jwks: Record<string, unknown>[] = [];
  for (const alg of ALGORITHMS) {
    const pair = await generateKeyPair(alg, { extractable: true });
    const kid = `${alg.toLowerCase()}-${randomBytes(4).toString('hex')}`;
    keys.set(alg, { privateKey: pair.privateKey, kid });
    jwks.push({ ...(await exportJWK(pair.publicKey)), kid, alg, use: 'sig' });
  }
  const requests: string[] = [];
  let failing = false;
  let issuer = '';
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0] ?? '';
    requests.push(path);
    const send = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    const base = new URL(issuer).pathname.replace(/\/$/, '');
    if (path === `${base}/.well-known/openid-configuration`) {
      if (failing) return send(500, { error: 'down' });
      return send(200, {
        issuer,
        jwks_uri: `${issuer.replace(/\/$/, '')}/jwks`,
        id_token_signing_alg_values_supported: ALGORITHMS,
      });
    }
    if (path === `${base}/jwks`) return send(200, { keys: jwks });
    send(404, { error: 'not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  issuer = `http://127.0.0.1:${port}${options.issuerSuffix ?? ''}`;
  return {
    issuer,
    requests,
    async sign(claims, signOptions = {}) {
      const alg = signOptions.alg ?? 'RS256';
      const key = keys.get(alg);
      if (!key) throw new Error(`the test issuer has no ${alg} key`);
      const now = Math.floor(Date.now() / 1000) + (signOptions.iatOffsetS ?? 0);
      return new SignJWT({ iss: issuer, ...claims })
        .setProtectedHeader({ alg, kid: key.kid, typ: 'JWT' })
        .setIssuedAt(now)
        .setExpirationTime(now + (signOptions.expiresInS ?? 300))
        .sign(key.privateKey);
    },
    failDiscovery(fail) {
      failing = fail;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A compact JWS signed with HMAC (HS256): the family the node refuses outright. */
export async function hs256Token(claims: JWTPayload): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt(now)
    .setExpirationTime(now + 300)
    .sign(randomBytes(32));
}
