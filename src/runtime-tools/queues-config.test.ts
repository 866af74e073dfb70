// The `queues` key of the worker config (docs/bindings.md "Queues"): producers and consumers as
// wrangler has them, Cloudflare's consumer defaults, and every refusal naming the key.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BindingNames, parseQueues, WorkerConfigError } from './worker-config.ts';

const bad = (path: (string | number)[], why: string) =>
  new WorkerConfigError('cell.jsonc', { line: 1, column: 1 }, `${JSON.stringify(path)} ${why}`);
/** Parses `value` after `held` names were taken by other bindings (name and who holds it). */
const parse = (value: unknown, held: { name: string; by: string }[] = []) => {
  const names = new BindingNames(bad);
  for (const { name, by } of held) names.hold(name, by);
  return parseQueues(value, bad, names);
};

describe('queues (docs/bindings.md "Queues")', () => {
  it("reads producers and consumers, filling a consumer's unset fields with Cloudflare's defaults", () => {
    assert.deepEqual(
      parse({
        producers: [
          { binding: 'JOBS', queue: 'jobs' },
          { binding: 'LATER', queue: 'jobs', delivery_delay: 30 },
        ],
        consumers: [
          { queue: 'jobs' },
          {
            queue: 'mail',
            max_batch_size: 100,
            max_batch_timeout: 0,
            max_retries: 0,
            dead_letter_queue: 'mail-dead',
            retry_delay: 60,
            max_concurrency: 1,
            type: 'worker',
          },
        ],
      }),
      {
        producers: [
          { binding: 'JOBS', queue: 'jobs' },
          { binding: 'LATER', queue: 'jobs', delivery_delay: 30 },
        ],
        consumers: [
          {
            queue: 'jobs',
            max_batch_size: 10,
            max_batch_timeout: 5,
            max_retries: 3,
            dead_letter_queue: null,
            retry_delay: 0,
            max_concurrency: null,
          },
          {
            queue: 'mail',
            max_batch_size: 100,
            max_batch_timeout: 0,
            max_retries: 0,
            dead_letter_queue: 'mail-dead',
            retry_delay: 60,
            max_concurrency: 1,
          },
        ],
      },
    );
    assert.deepEqual(parse(undefined), { producers: [], consumers: [] });
    assert.deepEqual(parse({ producers: [], consumers: [] }), { producers: [], consumers: [] });
  });

  it('refuses each malformed entry, naming its key', () => {
    const cases: [unknown, RegExp][] = [
      [[], /\["queues"\] must be an object/],
      [{ pull: [] }, /\["queues","pull"\] is not a queues setting/],
      [{ producers: {} }, /\["queues","producers"\] must be a list/],
      [{ producers: [{ queue: 'a' }] }, /\["queues","producers",0\] needs "binding"/],
      [{ producers: [{ binding: 'A' }] }, /\["queues","producers",0\] needs "queue"/],
      [{ producers: [{ binding: '1A', queue: 'a' }] }, /"binding"\] must be a binding name/],
      [{ producers: [{ binding: 'A', queue: 'A_b' }] }, /"queue"\] must be a queue name: 1-63 lowercase/],
      [
        {
          producers: [
            { binding: 'A', queue: 'a' },
            { binding: 'A', queue: 'b' },
          ],
        },
        /which an earlier queue producer binds/,
      ],
      [
        { producers: [{ binding: 'A', queue: 'a', delivery_delay: 86401 }] },
        /"delivery_delay"\] must be a whole number of seconds from 0 to 86400, got 86401/,
      ],
      [{ consumers: [{ max_retries: 1 }] }, /\["queues","consumers",0\] needs "queue"/],
      [
        { consumers: [{ queue: 'a' }, { queue: 'a' }] },
        /which an earlier consumer consumes: a queue has one consumer/,
      ],
      [
        { consumers: [{ queue: 'a', type: 'http_pull' }] },
        /"type"\] is not supported: .*no HTTP pull consumers/,
      ],
      [
        { consumers: [{ queue: 'a', visibility_timeout_ms: 1 }] },
        /"visibility_timeout_ms"\] is for HTTP pull consumers/,
      ],
      [
        { consumers: [{ queue: 'a', dead_letter_queue: 'a' }] },
        /"dead_letter_queue"\] names the queue itself/,
      ],
      [
        { consumers: [{ queue: 'a', max_batch_size: 0 }] },
        /"max_batch_size"\] must be a whole number of messages from 1 to 100, got 0/,
      ],
      [
        { consumers: [{ queue: 'a', max_batch_timeout: 61 }] },
        /"max_batch_timeout"\] must be a whole number of seconds from 0 to 60/,
      ],
      [
        { consumers: [{ queue: 'a', max_retries: 1.5 }] },
        /"max_retries"\] must be a whole number of retries from 0 to 100/,
      ],
      [
        { consumers: [{ queue: 'a', max_concurrency: 251 }] },
        /"max_concurrency"\] must be a whole number of invocations from 1 to 250/,
      ],
    ];
    for (const [value, expected] of cases) assert.throws(() => parse(value), expected, JSON.stringify(value));
    assert.throws(
      () => parse({ producers: [{ binding: 'KV', queue: 'a' }] }, [{ name: 'KV', by: 'a KV namespace' }]),
      /names KV, which a KV namespace also binds; choose another name/,
    );
  });
});
