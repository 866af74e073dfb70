// docs/api.md "Secrets": an application's secrets through a node, for callers without bucket
// credentials (an operator key scoped to the application, a CI job's workload token). The value
// never crosses this API: the caller reads the serving nodes' sealing keys here, seals on its own
// machine and hands over only the sealed copies (design: docs/decisions.md "Secrets").
//
// Tier `operator-or-workload`: the guard has authenticated the caller (an operator record re-read
// on this request, or a workload token the application's trust policy admits), checked `:name`
// and enforced scope on it before any handler runs. Node tokens are refused: no node needs these.

import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { describeCaller } from '../../auth/caller.ts';
import { callerOf } from '../../auth/guard.ts';
import { Problem } from '../../problem.ts';
import { getApplication } from '../../registry/applications.ts';
import { ensureSealKey } from '../../secrets/node-key.ts';
import {
  checkOwnCopies,
  checkSealedTo,
  MAX_SEALED_BODY_BYTES,
  parseSealedSecretsBody,
} from '../../secrets/sealed-request.ts';
import {
  checkSecretName,
  listSecrets,
  noSealRecipients,
  type Recipient,
  readSecrets,
  recipientsOf,
  refuseVarClash,
  updateSecrets,
  withoutSecret,
  withSealedSecrets,
} from '../../secrets/secrets.ts';
import type { NodeContext } from '../context.ts';
import { readNodeRecords } from '../deploys/skew.ts';

const scoped = { config: { auth: 'operator-or-workload' as const } };

type NameParams = { Params: { name: string } };
type SecretParams = { Params: { name: string; secret: string } };

export async function secretRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  const recipients = async (): Promise<Recipient[]> =>
    recipientsOf(await readNodeRecords(ctx.store), Date.now());

  app.get<NameParams>('/v1/applications/:name/secrets', scoped, async (request) => {
    const name = request.params.name;
    await getApplication(ctx.store, name);
    const found = await readSecrets(ctx.store, name);
    return { application: name, secrets: listSecrets(found?.doc ?? null), recipients: await recipients() };
  });

  app.post<NameParams>(
    '/v1/applications/:name/secrets',
    {
      ...scoped,
      bodyLimit: Math.max(ctx.settings.api.jsonBytes, MAX_SEALED_BODY_BYTES),
      errorHandler: bodyTooLarge,
    },
    async (request) => {
      const name = request.params.name;
      const sealed = parseSealedSecretsBody(request.body);
      await getApplication(ctx.store, name);
      const serving = await recipients();
      if (serving.length === 0) throw noSealRecipients();
      checkSealedTo(sealed, serving);
      if (serving.some((r) => r.node === ctx.nodeId)) {
        checkOwnCopies(sealed, name, {
          node: ctx.nodeId,
          pair: await ensureSealKey(ctx.settings.node.stateDir),
        });
      }
      const names = Object.keys(sealed).sort();
      await refuseVarClash(ctx.store, name, names);
      const by = actor(request);
      await updateSecrets(ctx.store, name, (doc) =>
        withSealedSecrets(doc, { application: name, sealed, by, now: new Date() }),
      );
      const nodes = serving.map((r) => r.node);
      ctx.events?.emit({ kind: 'secret.set', application: name, actor: by, secrets: names, nodes });
      ctx.log.info(
        { event: 'secret.set', application: name, actor: by, secrets: names, nodes },
        `secrets ${names.join(', ')} of ${name} set by ${by}`,
      );
      // updateSecrets moved the fleet's change marker for the other nodes; this one looks now.
      ctx.fleet?.changed();
      return { application: name, set: names, nodes };
    },
  );

  app.delete<SecretParams>('/v1/applications/:name/secrets/:secret', scoped, async (request) => {
    const name = request.params.name;
    const secret = checkSecretName(request.params.secret);
    await getApplication(ctx.store, name);
    await updateSecrets(ctx.store, name, (doc) => withoutSecret(doc, secret, name, new Date()));
    const by = actor(request);
    ctx.events?.emit({ kind: 'secret.removed', application: name, actor: by, secret });
    ctx.log.info(
      { event: 'secret.removed', application: name, actor: by, secret },
      `secret ${secret} of ${name} removed by ${by}`,
    );
    ctx.fleet?.changed();
    return { application: name, removed: secret };
  });
}

function actor(request: FastifyRequest): string {
  return describeCaller(callerOf(request));
}

/** The body bound here is the sealed one, not `api.jsonBytes`: say so; anything else goes on. */
function bodyTooLarge(err: FastifyError): never {
  if (err.code !== 'FST_ERR_CTP_BODY_TOO_LARGE') throw err;
  throw new Problem(
    'resource-limit',
    'Request body too large',
    `sealed secrets are at most ${MAX_SEALED_BODY_BYTES} bytes in one request; set fewer at once`,
  );
}
