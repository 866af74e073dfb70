// Failures as RFC 9457 problem documents: docs/api.md "Conventions" and "Error codes",
// docs/cli.md "Output and exit status". Every refusal in svc is a Problem carrying one code.

/** Every error code of docs/api.md "Error codes" (command-line codes too), mapped to its HTTP status. */
export const problemStatus = {
  'auth-invalid': 401,
  'auth-scope': 403,
  'trust-mismatch': 403,
  'invalid-input': 400,
  'invalid-slug': 400,
  'not-found': 404,
  'reference-held': 409,
  'application-blocked': 409,
  'deploys-frozen': 409,
  'version-skew': 409,
  'capability-missing': 409,
  'cas-conflict': 409,
  'deploy-timeout': 408,
  'deploy-overloaded': 429,
  'resource-limit': 413,
  'store-unavailable': 503,
  draining: 503,
  // Raised by command-line paths; the spec leaves their status open (docs/decisions.md).
  'lease-lost': 409,
  'store-nonconforming': 502,
  // Carried on failed deploy records only.
  'publish-failed': 500,
  internal: 500,
} as const;

export type ProblemCode = keyof typeof problemStatus;

/** The wire form of a problem (docs/api.md "Conventions"). */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail?: string;
}

/** A failure the service names: one code, a short title, an optional detail. */
export class Problem extends Error {
  readonly code: ProblemCode;
  readonly title: string;
  readonly detail: string | undefined;
  readonly status: number;
  /** Extra response headers, such as `retry-after` on `deploy-overloaded`. */
  readonly headers: Record<string, string>;

  constructor(
    code: ProblemCode,
    title: string,
    detail?: string,
    options: { status?: number; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(detail ? `${title}: ${detail}` : title, { cause: options.cause });
    this.name = 'Problem';
    this.code = code;
    this.title = title;
    this.detail = detail;
    this.status = options.status ?? problemStatus[code];
    this.headers = options.headers ?? {};
  }

  toJSON(): ProblemDocument {
    const doc: ProblemDocument = { type: `urn:svc:${this.code}`, title: this.title, status: this.status };
    if (this.detail !== undefined) doc.detail = this.detail;
    return doc;
  }

  /** Rebuilds a Problem from a problem document a node answered with, keeping the node's code. */
  static fromDocument(doc: unknown, fallbackStatus: number): Problem {
    const d = (doc ?? {}) as Partial<ProblemDocument>;
    const code = typeof d.type === 'string' && d.type.startsWith('urn:svc:') ? d.type.slice(8) : '';
    const known = code in problemStatus ? (code as ProblemCode) : 'internal';
    const title = typeof d.title === 'string' && d.title ? d.title : `HTTP ${fallbackStatus}`;
    const detail = typeof d.detail === 'string' ? d.detail : undefined;
    const problem = new Problem(known, title, detail, { status: d.status ?? fallbackStatus });
    // Keep an unknown code verbatim so the CLI prints what the node said.
    if (known === 'internal' && code) Object.defineProperty(problem, 'code', { value: code });
    return problem;
  }
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export function isProblem(value: unknown): value is Problem {
  return value instanceof Problem;
}

/** Shorthands for the refusals every module raises. */
export const invalidInput = (title: string, detail?: string) => new Problem('invalid-input', title, detail);
export const notFound = (title: string, detail?: string) => new Problem('not-found', title, detail);

/**
 * The CLI's one-line rendering of a failure (docs/cli.md "Output and exit status"):
 * `svc: <title>[: <detail>] [urn:svc:<code>]`, or for anything unnamed
 * `svc: unexpected failure: <message chain, up to 4 causes>`.
 */
export function renderFailureLine(err: unknown): string {
  if (isProblem(err)) {
    const detail = err.detail ? `: ${err.detail}` : '';
    return `svc: ${err.title}${detail} [urn:svc:${err.code}]`;
  }
  return `svc: unexpected failure: ${causeChain(err).join(': ')}`;
}

/**
 * The messages of a failure and of the causes under it, outermost first, at most `limit` of
 * them: the one walk of an `Error.cause` chain, for every line that prints an unnamed failure.
 */
export function causeChain(err: unknown, limit = 5): string[] {
  const messages: string[] = [];
  let current: unknown = err;
  while (current !== undefined && current !== null && messages.length < limit) {
    if (current instanceof Error) {
      messages.push(current.message || current.name);
      current = current.cause;
    } else {
      messages.push(String(current));
      break;
    }
  }
  return messages;
}
