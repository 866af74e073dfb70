// Opens the fleet's bucket from the `bucket` settings group (docs/cli.md "Flag groups":
// bucket flags). No endpoint: the local-directory bucket at `<state-dir>/bucket`;
// `file:///abs/dir`: a local directory several nodes on one machine may share; any
// `http(s)://` URL: an S3-compatible service. `prefix` applies to all three.

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Problem } from '../problem.ts';
import { openDirStore } from './dir.ts';
import { withPrefix } from './prefixed.ts';
import type { Store } from './store.ts';

/** The bucket settings plus where the embedded bucket lives when none is named. */
export interface OpenStoreOptions {
  endpoint?: string;
  region?: string;
  bucket?: string;
  prefix?: string;
  accessKey?: string;
  secretKey?: string;
  /** Required when no endpoint is named: the embedded bucket is `<stateDir>/bucket`. */
  stateDir?: string;
}

/** Answers the store the options name; refuses a malformed endpoint with `invalid-input`. */
export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const endpoint = options.endpoint?.trim();
  if (!endpoint) {
    if (options.stateDir === undefined)
      throw invalidEndpoint('', 'no endpoint is set; name an S3 URL or file:///abs/dir');
    return withPrefix(await openDirStore(join(options.stateDir, 'bucket')), options.prefix);
  }
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw invalidEndpoint(endpoint, 'it is not a URL');
  }
  if (url.protocol === 'file:') {
    if (url.host !== '' && url.host !== 'localhost') {
      throw invalidEndpoint(endpoint, 'a file:// endpoint names a local directory (file:///abs/dir)');
    }
    return withPrefix(await openDirStore(fileURLToPath(url)), options.prefix);
  }
  if (url.protocol === 'http:' || url.protocol === 'https:') {
    const { openS3Store } = await import('./s3.ts');
    return openS3Store({ ...options, endpoint });
  }
  throw invalidEndpoint(endpoint, 'use an http(s):// S3 endpoint or file:///abs/dir');
}

function invalidEndpoint(endpoint: string, why: string): Problem {
  return new Problem(
    'invalid-input',
    'Invalid setting bucket.endpoint',
    `${JSON.stringify(endpoint)}: ${why}`,
  );
}
