// `cell host` (docs/runtime.md "The runtime host"): with `--stdio`, the private host of a `cell serve`
// run without a node daemon: its front starts it once and talks to it on its stdin and stdout,
// and it exits when its input ends. With `--socket`, a node's host without svc's daemon. Either
// way it opens the bucket the environment names.

import { openBucketFromEnv } from '../bucket.ts';
import { CELL_VERSION_LINE } from '../version.ts';
import { serveFront } from './host.ts';
import { listenHostSocket } from './socket.ts';

export async function hostOnStdio(env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<number> {
  // The front reading our answers may be gone: the answers are lost, never the process.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  const store = await openBucketFromEnv(env);
  try {
    await serveFront(
      {
        input: process.stdin,
        write: (text) => process.stdout.write(text),
        // A refused front: nothing more is read, so the process can end.
        end: () => {
          process.stdout.end();
          process.stdin.destroy();
        },
      },
      { store, name: CELL_VERSION_LINE, log: (line) => log(`cell host: ${line}`) },
    );
  } finally {
    await store.close();
  }
  return 0;
}

/** `cell host --socket <path>`: a node's host without the daemon, until SIGTERM or SIGINT. */
export async function hostOnSocket(
  path: string,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<number> {
  const store = await openBucketFromEnv(env);
  const host = await listenHostSocket(path, {
    store,
    name: CELL_VERSION_LINE,
    log: (line) => log(`cell host: ${line}`),
  });
  log(`cell host: serving runtimes on ${path}`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await host.close();
  await store.close();
  return 0;
}
