// Bucket access for the runtime (docs/runtime.md: bucket access is
// handed to the runtime in its environment by the node that starts it), through the same
// store svc uses: the variables are svc's own `SVC_S3_*`.

import { readBucketAccess } from '../../src/runtime-contract/environment.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/store.ts';
import { CellError } from './errors.ts';

/** The bucket the environment names; a `file:///abs/dir` endpoint is the local-directory bucket. */
export async function openBucketFromEnv(env: NodeJS.ProcessEnv): Promise<Store> {
  const access = readBucketAccess(env);
  if (!access) {
    throw new CellError(
      'no bucket: SVC_S3_ENDPOINT is not set (the node hands it to the runtime; set it to an S3 URL or file:///abs/dir)',
    );
  }
  return openStore(access);
}
