// One racer of the store contract suite's cross-process race (N processes
// racing on one key, exactly one wins each round). Started with `fork` by
// test/store-contract.test.ts; argv[2] is JSON `{ options, key, id }` where `options` are
// openStore's. It answers messages over the IPC channel:
//
//   { cmd: 'read' }            -> { etag: string | null }   remembers the ETag it saw
//   { cmd: 'write', round }    -> { won: true, etag } | { won: false }
//                                 a conditional write of `<id>:<round>` on what it saw
//   { cmd: 'exit' }            -> closes the store and exits
//
// Anything else that goes wrong is answered `{ error }` so the test fails with the cause.

import { openStore } from '../../src/store/open.ts';
import { isCasConflict } from '../../src/store/store.ts';

const { options, key, id } = JSON.parse(process.argv[2] ?? '{}');
const store = await openStore(options);
let seen: string | null = null;

process.on('message', async (message: { cmd: string; round?: number }) => {
  try {
    if (message.cmd === 'read') {
      seen = (await store.stat(key))?.etag ?? null;
      process.send!({ etag: seen });
    } else if (message.cmd === 'write') {
      const condition = seen === null ? { ifNoneMatch: '*' as const } : { ifMatch: seen };
      try {
        const etag = await store.put(key, `${id}:${message.round}`, condition);
        process.send!({ won: true, etag });
      } catch (err) {
        if (!isCasConflict(err)) throw err;
        process.send!({ won: false });
      }
    } else if (message.cmd === 'exit') {
      await store.close();
      process.disconnect();
    }
  } catch (err) {
    process.send!({ error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  }
});
process.send!({ ready: true });
