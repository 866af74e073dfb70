// The svc release, read once from package.json.

import { readFileSync } from 'node:fs';

export const SVC_VERSION: string = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
).version;
