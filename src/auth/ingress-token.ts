// The ingress token (docs/identity.md "Ingress tokens and their rotation"; docs/ingress.md "Authentication"):
// an opaque bearer token guarding `/v1/storage/**` and `/v1/ingress/routes*` and nothing else. A node mints
// one at boot unless `ingress.token` names some; then all are admitted. The first is written to
// `<stateDir>/ingress-token` (0600) for the ingress to read.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import { replaceStateFile } from '../config/state-file.ts';
import { Problem } from '../problem.ts';

export const INGRESS_TOKEN_FILE = 'ingress-token';

/** What a token may hold: printable ASCII without spaces, so it survives headers and files. */
const TOKEN_CHARS = /^[\x21-\x7e]{1,1024}$/;

/** The admitted ingress tokens of one node, compared in constant time. */
export class IngressTokens {
  readonly #digests: Buffer[];
  /** The token written to the state directory: the first configured, or the minted one. */
  readonly first: string;
  readonly minted: boolean;

  constructor(tokens: readonly string[], minted = false) {
    if (tokens.length === 0) throw new Error('at least one ingress token is admitted');
    this.first = tokens[0]!;
    this.minted = minted;
    this.#digests = tokens.map(digest);
  }

  /**
   * Whether a presented token is admitted. Digests have one length whatever the token's, and
   * every admitted token is compared, so timing tells nothing about which nor how much matched.
   */
  admits(presented: string | null): boolean {
    if (presented === null) return false;
    const candidate = digest(presented);
    let match = false;
    for (const admitted of this.#digests) match = timingSafeEqual(candidate, admitted) || match;
    return match;
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** A fresh token: 32 random bytes, base64url. */
export function mintIngressToken(): string {
  return `svc-ingress-${randomBytes(32).toString('base64url')}`;
}

/** Checks configured tokens: each one is printable ASCII without spaces. */
export function checkIngressTokens(tokens: readonly string[]): string[] {
  for (const token of tokens) {
    if (!TOKEN_CHARS.test(token)) {
      throw new Problem(
        'invalid-input',
        'Invalid setting ingress.token',
        'each ingress token must be 1-1024 printable ASCII characters without spaces',
      );
    }
  }
  return [...tokens];
}

/**
 * The boot-time step: admits the configured tokens, or mints one, and writes the first to
 * `<stateDir>/ingress-token` readable by the owner alone (written aside, then renamed, so an
 * ingress never reads half a token).
 */
export async function establishIngressTokens(
  configured: readonly string[],
  stateDir: string,
): Promise<IngressTokens> {
  const tokens = configured.length > 0 ? checkIngressTokens(configured) : [mintIngressToken()];
  const file = join(stateDir, INGRESS_TOKEN_FILE);
  await replaceStateFile(file, `${tokens[0]}\n`);
  return new IngressTokens(tokens, configured.length === 0);
}
