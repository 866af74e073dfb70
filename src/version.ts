// The svc release and where its package lives. Both are found relative to this file, which
// sits one level below the package root both in the checkout (src/) and in the release
// bundle (dist/), so they hold either way.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** The directory holding package.json, runtime/ and (in a checkout) src/. */
export const PACKAGE_ROOT = resolve(import.meta.dirname, '..');

export const SVC_VERSION: string = JSON.parse(
  readFileSync(resolve(PACKAGE_ROOT, 'package.json'), 'utf8'),
).version;
