import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the checkpoint thread copies the WAL's new pages into the database file. */
export const CHECKPOINT_EVERY_MS = 100;

/**
 * The thread's code, evaluated as CommonJS: no file of its own to build, ship or resolve. It opens its own
 * connection and runs PASSIVE checkpoints, which never wait for the writer or for readers: they copy what they
 * can and leave the rest for the next one.
 */
const SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 0');
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch (error) {
    if (error.code !== 'SQLITE_BUSY') parentPort.postMessage(String(error));
  }
}, workerData.everyMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

export interface Checkpointer {
  /** Stops the thread (after the checkpoint in progress) and closes its connection. */
  close(): Promise<void>;
}

/**
 * Checkpoints a WAL-mode SQLite file from a thread of its own. SQLite checkpoints inside the COMMIT that takes the
 * WAL past 1,000 pages: it writes those pages into the database file and syncs it, and better-sqlite3 being
 * synchronous, the event loop (every request of the process) waits for that, a long stall on a large database
 * whose pages are scattered. With this thread copying the WAL every 100 ms, such a COMMIT finds the pages
 * copied already and has little or nothing left to do. The writer's own threshold stays SQLite's 1,000 pages: it
 * bounds the WAL should the thread fall behind or die (measured with it raised tenfold, the writer's rare large
 * checkpoints stalled every kind of request; see bench/README.md). `onError` hears of checkpoints
 * that failed for another reason than a busy lock, and of the thread's death.
 */
export function startCheckpointer(file: string, onError: (error: unknown) => void): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(SOURCE, { eval: true, workerData: { file, driver, everyMs: CHECKPOINT_EVERY_MS } });
  worker.on('message', (message: string) => onError(new Error(`SQLite checkpoint failed: ${message}`)));
  worker.on('error', onError);
  // The process may exit while the thread runs: the interval alone must not keep it alive.
  worker.unref();
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    async close() {
      // Referenced again while it shuts down: with nothing else pending, an unreferenced thread's exit would not
      // keep the process alive, and it would end (with code 0) before this promise, and whatever awaits it, settles.
      worker.ref();
      worker.postMessage('close');
      await exited;
    },
  };
}
