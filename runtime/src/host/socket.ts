// The node's runtime host socket (docs/runtime.md "The runtime host"): the daemon serves every
// front of the node on one Unix socket in its state folder, owner-only, so only processes of the
// node's own user reach it. A daemon restarting (SIGUSR2, or after a crash) takes the same path:
// the stale socket file is removed and the fronts, which reconnect on their own, find the new one.

import { chmod, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { type HostOptions, serveFront } from './host.ts';

/** The longest socket path Linux takes (sun_path is 108 bytes, one for the NUL). */
export const MAX_SOCKET_PATH = 107;

export interface HostSocket {
  path: string;
  /** Stops taking fronts and ends every connection; the fronts reconnect to the next host. */
  close(): Promise<void>;
}

export async function listenHostSocket(path: string, options: HostOptions): Promise<HostSocket> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {}); // a front that went away: its answers are lost, nothing else
    socket.on('close', () => sockets.delete(socket));
    const connection = {
      input: socket,
      write: (text: string) => {
        if (!socket.destroyed) socket.write(text);
      },
      end: () => socket.end(),
    };
    serveFront(connection, options).then(
      () => socket.end(),
      (err: unknown) => {
        options.log(`a runtime's connection failed: ${(err as Error).message}`);
        socket.destroy();
      },
    );
  });
  await listenOwnerOnly(server, path, 'runtime host');
  return {
    path,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
      await rm(path, { force: true });
    },
  };
}

/**
 * Listens on the Unix socket at `path`, owner-only, with the rules every socket of the host
 * keeps (the runtime socket, the bindings socket): a path too long is refused naming
 * --state-dir, a stale file a killed process left is replaced, and a socket something still
 * answers on is never taken from it. `what` names the socket in the refusals.
 */
export async function listenOwnerOnly(server: Server, path: string, what: string): Promise<void> {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH)
    throw new Error(
      `the ${what} socket ${path} is longer than ${MAX_SOCKET_PATH} bytes; choose a shorter state directory (--state-dir)`,
    );
  // A socket file is left behind by a host that was killed; one that still answers belongs to a
  // host that runs, whose clients must not be taken from it.
  if (await answers(path))
    throw new Error(`another ${what} is listening on ${path}: one svc sail per state directory`);
  await rm(path, { force: true });
  // Owner-only from the first instant: the file is made with the process's umask, so tighten it
  // for the listen and restore it at once.
  const umask = process.umask(0o077);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    process.umask(umask);
  }
  await chmod(path, 0o600);
}

/** Whether something accepts connections on the socket at `path`. */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(path);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
}

/** Stops a listener `listenOwnerOnly` started: no new connections, open ones cut, the file removed. */
export async function closeOwnerOnly(server: HttpServer, path: string): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
  await rm(path, { force: true });
}
