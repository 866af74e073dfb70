// `svc trust` (docs/cli.md "svc trust"): workload OIDC trust policies, written to the bucket directly
// (bucket flags; authorized by the bucket credentials) with conditional writes (src/registry/trust.ts).

import type { Command } from 'commander';
import { Problem } from '../problem.ts';
import { resolveApplicationName } from '../registry/names.ts';
import {
  addTrustedSubjects,
  DEFAULT_AUDIENCE,
  readTrustPolicy,
  removeTrustedIssuer,
  setTrustedSubjects,
  type TrustPolicy,
} from '../registry/trust.ts';
import type { Store } from '../store/store.ts';
import { addBucketFlags, addNameFlags, repeatable, withBucket } from './flags.ts';
import { say } from './output.ts';

interface TrustFlags extends Record<string, unknown> {
  name: string;
  env?: string;
  issuer?: string;
  subject?: string[];
  audience?: string;
}

export function registerTrust(program: Command): void {
  const trust = program.command('trust').description('Which workload identities may deploy an application');
  const subject = (command: Command) =>
    command
      .requiredOption('--issuer <url>', 'Issuer URL as carried in iss')
      .requiredOption('--subject <pattern>', 'Subject pattern, * matches any run; repeatable', repeatable)
      .option('--audience <aud>', 'Audience', DEFAULT_AUDIENCE);
  subject(
    addNameFlags(addBucketFlags(trust.command('set').description('Replace the subjects of an issuer')), true),
  ).action((flags: TrustFlags) => trustChange(flags, 'set'));
  subject(
    addNameFlags(addBucketFlags(trust.command('add').description('Add subjects to an issuer')), true),
  ).action((flags: TrustFlags) => trustChange(flags, 'add'));
  addNameFlags(addBucketFlags(trust.command('show').description('Print trusted issuers')), true).action(
    (flags: TrustFlags) => trustShow(flags),
  );
  addNameFlags(addBucketFlags(trust.command('remove').description('Stop trusting an issuer')), true)
    .requiredOption('--issuer <url>', 'Issuer URL')
    .action((flags: TrustFlags) => trustRemove(flags));
}

/** Opens the bucket for one application's policy; the name is checked before the bucket is opened. */
function withApplicationBucket<T>(
  flags: TrustFlags,
  work: (store: Store, application: string) => Promise<T>,
): Promise<T> {
  const application = resolveApplicationName(flags.name, flags.env);
  return withBucket(flags, (store) => work(store, application));
}

async function trustChange(flags: TrustFlags, how: 'set' | 'add'): Promise<void> {
  await withApplicationBucket(flags, async (store, application) => {
    const change = {
      issuer: flags.issuer ?? '',
      audience: flags.audience ?? DEFAULT_AUDIENCE,
      subjects: flags.subject ?? [],
    };
    const policy =
      how === 'set'
        ? await setTrustedSubjects(store, application, change)
        : await addTrustedSubjects(store, application, change);
    const entry = policy.entries.find((e) => e.issuer === change.issuer && e.audience === change.audience)!;
    say(
      `${application} trusts ${entry.issuer} (audience ${entry.audience}) for subjects: ${entry.subjects.join(', ')}`,
    );
  });
}

async function trustShow(flags: TrustFlags): Promise<void> {
  await withApplicationBucket(flags, async (store, application) => {
    const policy = await readTrustPolicy(store, application);
    for (const line of renderPolicy(application, policy)) say(line);
  });
}

async function trustRemove(flags: TrustFlags): Promise<void> {
  await withApplicationBucket(flags, async (store, application) => {
    const issuer = flags.issuer ?? '';
    const { removed } = await removeTrustedIssuer(store, application, issuer);
    if (!removed) {
      throw new Problem(
        'not-found',
        'Issuer not trusted',
        `${application} does not trust ${JSON.stringify(issuer)}; svc trust show --name ${application} lists the issuers it does`,
      );
    }
    say(`${application} no longer trusts ${issuer}`);
  });
}

/** `trust show`: one block per issuer and audience, subjects one per line. */
export function renderPolicy(application: string, policy: TrustPolicy | null): string[] {
  if (!policy || policy.entries.length === 0) {
    return [`${application} trusts no workload identity; add one with svc trust add`];
  }
  const lines: string[] = [];
  for (const entry of policy.entries) {
    lines.push(`${entry.issuer} (audience ${entry.audience})`);
    for (const subject of entry.subjects) lines.push(`  ${subject}`);
  }
  return lines;
}
