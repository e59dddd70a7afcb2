import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the checkpoint thread copies the WAL's new pages into the database file. */
export const CHECKPOINT_EVERY_MS = 100;

/**
 * WAL pages after which the writing connection checkpoints by itself anyway: a backstop for when the thread falls
 * behind (or failed to start), so the WAL cannot grow without bound. SQLite's own default is 1,000.
 */
export const BACKSTOP_PAGES = 10_000;

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
 * Checkpoints a WAL-mode SQLite file from a thread of its own. By default SQLite checkpoints inside the COMMIT that
 * takes the WAL past 1,000 pages: it writes those pages into the database file and syncs it, and better-sqlite3
 * being synchronous, the event loop (every request of the process) waits for that sync, tens of milliseconds on a
 * large database whose pages are scattered. Here the writing connection only appends to the WAL, and the sync is
 * this thread's. `onError` hears of checkpoints that failed for another reason than a busy lock, and of the
 * thread's death (after which `onDied` runs: the writer has to checkpoint by itself again).
 */
export function startCheckpointer(file: string, onError: (error: unknown) => void, onDied: () => void): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(SOURCE, { eval: true, workerData: { file, driver, everyMs: CHECKPOINT_EVERY_MS } });
  worker.on('message', (message: string) => onError(new Error(`SQLite checkpoint failed: ${message}`)));
  worker.on('error', (error) => {
    onError(error);
    onDied();
  });
  // The process may exit while the thread runs: the interval alone must not keep it alive.
  worker.unref();
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    async close() {
      worker.postMessage('close');
      await exited;
    },
  };
}
