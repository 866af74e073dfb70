// How `cell` fails (docs/runtime.md: a failure exits non-zero with a
// message a user can act on). A CellError is such a message; anything else is a bug and is
// printed with its cause chain.

import { causeChain, isProblem } from '../../src/problem.ts';

/** A failure the user can act on: printed as `cell: <message>`, exit 1. */
export class CellError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CellError';
  }
}

/** The one line printed for a failure. */
export function renderError(err: unknown): string {
  if (err instanceof CellError) return `cell: ${err.message}`;
  // The store names its failures (store-unavailable, store-nonconforming) as svc does.
  if (isProblem(err)) return `cell: ${err.message} [urn:svc:${err.code}]`;
  return `cell: unexpected failure: ${causeChain(err).join(': ')}`;
}
