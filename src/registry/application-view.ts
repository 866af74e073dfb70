// What a caller may see of an application record (docs/applications.md "The application record"): `labels`
// belong to the fleet's admins.

import type { ApplicationRecord } from './records.ts';

/** The view a caller gets: admins see everything; others lose the fleet-owned `labels`. */
export function redactApplication(
  record: ApplicationRecord,
  admin: boolean,
): ApplicationRecord | Omit<ApplicationRecord, 'labels'> {
  if (admin) return record;
  const { labels: _labels, ...rest } = record;
  return rest;
}
