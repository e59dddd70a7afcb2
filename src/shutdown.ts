import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';

/**
 * Closes the app within a bounded time, whatever its clients do.
 *
 * `app.close()` runs the preClose hooks (app.ts marks answers `Connection: close` and aborts `app.closing`, which
 * long-lived responses listen to), closes the idle keep-alive connections and waits for server.close(), that is
 * for every connection to end; then its onClose hooks close the database. A client that keeps a request open (a
 * body sent a byte at a time, a stream reader) would hold that wait forever, so after `graceMs` every connection
 * still open is destroyed, and close() completes.
 *
 * Before any of that, answers start saying `Connection: close`, and one pass of the event loop: a request whose bytes reached the socket just before the signal
 * is then parsed and in flight, rather than on a connection that looks idle and is destroyed under it
 * (the client would see ECONNRESET for a request it had sent).
 */
export async function shutdown(app: FastifyInstance, graceMs: number): Promise<void> {
  app.beginClose();
  await sleep(SETTLE_MS);
  const cutoff = setTimeout(() => {
    app.log.warn({ graceMs }, 'shutdown grace period over: closing the connections still open');
    app.server.closeAllConnections();
  }, graceMs);
  try {
    await app.close();
  } finally {
    clearTimeout(cutoff);
  }
}

/** Long enough for the event loop to read what has already arrived; far below any grace period. */
const SETTLE_MS = 50;
