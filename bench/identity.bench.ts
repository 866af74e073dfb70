// Target (bench/RESULTS.md "Token verification"): node/operator token verifications per second on one core, at least
// 10,000. Verification is bounded by Ed25519 itself, so the run also measures, on the same
// machine and in the same process, node:crypto's bare Ed25519 verify (the ceiling) and
// jose's compactVerify (the general path the verifier does not take), and prints ratios.
// Run: scripts/with-node node bench/identity.bench.ts
// The key cache is warm (as in steady state); every token is fresh, as tokens are single use.

import { verify } from 'node:crypto';
import { compactVerify } from 'jose';
import { generateSigningKey } from '../src/auth/ed25519.ts';
import { signToken } from '../src/auth/token.ts';
import { TokenVerifier } from '../src/auth/verifier.ts';
import { keys } from '../src/registry/keys.ts';
import { MemoryStore } from '../test/helpers/memory-store.ts';

const TARGET_PER_S = 10_000;
const TOKENS = 30_000;
const ROUNDS = 3;

const pair = generateSigningKey();
const store = new MemoryStore();
await store.putJson(keys.operator('op-bench'), {
  v: 1,
  id: 'op-bench',
  publicKey: pair.publicJwk,
  role: 'admin',
  applications: ['*'],
  registeredAt: '',
  registeredBy: 'bucket',
});
const signer = { id: 'op-bench', privateKey: pair.privateKey };
const publicKey = (await import('node:crypto')).createPublicKey(pair.privateKey);

async function freshTokens(n: number): Promise<string[]> {
  const tokens: string[] = [];
  for (let i = 0; i < n; i++) tokens.push(await signToken(signer));
  return tokens;
}

function perSecond(n: number, ms: number): number {
  return Math.round((n / ms) * 1000);
}

async function timeVerifier(tokens: string[]): Promise<number> {
  const verifier = new TokenVerifier({ store });
  await verifier.verify(await signToken(signer)); // warm the key cache
  const start = performance.now();
  for (const token of tokens) await verifier.verify(token);
  return perSecond(tokens.length, performance.now() - start);
}

function timeBare(tokens: string[]): number {
  const start = performance.now();
  for (const token of tokens) {
    const dot = token.lastIndexOf('.');
    if (
      !verify(
        null,
        Buffer.from(token.slice(0, dot)),
        publicKey,
        Buffer.from(token.slice(dot + 1), 'base64url'),
      )
    ) {
      throw new Error('bad signature');
    }
  }
  return perSecond(tokens.length, performance.now() - start);
}

async function timeJose(tokens: string[]): Promise<number> {
  const start = performance.now();
  for (const token of tokens) await compactVerify(token, publicKey, { algorithms: ['EdDSA'] });
  return perSecond(tokens.length, performance.now() - start);
}

const results = { verifier: [] as number[], bare: [] as number[], jose: [] as number[] };
for (let round = 0; round < ROUNDS; round++) {
  const tokens = await freshTokens(TOKENS);
  results.bare.push(timeBare(tokens));
  results.jose.push(await timeJose(tokens));
  results.verifier.push(await timeVerifier(tokens));
}
const best = (list: number[]) => Math.max(...list);
const verifier = best(results.verifier);
const bare = best(results.bare);
const jose = best(results.jose);
console.log(
  `svc TokenVerifier.verify        ${verifier.toLocaleString('en')} /s (best of ${ROUNDS} x ${TOKENS})`,
);
console.log(
  `node:crypto Ed25519 verify only ${bare.toLocaleString('en')} /s  (verifier at ${((verifier / bare) * 100).toFixed(1)}% of it)`,
);
console.log(
  `jose compactVerify              ${jose.toLocaleString('en')} /s  (verifier ${(verifier / jose).toFixed(2)}x of it)`,
);
console.log(
  `target ${TARGET_PER_S.toLocaleString('en')} /s: ${verifier >= TARGET_PER_S ? 'met' : 'NOT met'}`,
);
