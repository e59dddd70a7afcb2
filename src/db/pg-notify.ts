import pg from 'pg';
import { sql, type Kysely } from 'kysely';
import type { Database } from './types.js';

/**
 * PostgreSQL's notification channel, for telling every server process that something committed (live streams,
 * CONTRACT §7). Payloads are references, never bodies: NOTIFY carries at most 8,000 bytes.
 */

export interface Notifier {
  /** Sends an empty notification on the channel, soon: a reference, the listeners read what committed. */
  notify(): void;
}

/**
 * Notifies on `channel` from the pool, in a statement of its own, after the writes it tells of have committed, and
 * never inside them: a transaction that notified takes a lock global to the database at its commit, so NOTIFY in
 * every write transaction would make their commits go one at a time (issue 45). At most one is in flight per
 * process: calls while one is sent make one more after it, so a burst of commits costs two notifications, not one
 * each. A failure is only reported: listeners also poll.
 */
export function afterCommitNotifier(db: Kysely<Database>, channel: string, onError: (error: unknown) => void): Notifier {
  let sending = false;
  let again = false;
  const send = () => {
    sending = true;
    again = false;
    sql`select pg_notify(${channel}, '')`
      .execute(db)
      .catch(onError)
      .finally(() => {
        sending = false;
        if (again) send();
      });
  };
  return {
    notify() {
      if (sending) again = true;
      else send();
    },
  };
}

export interface Listener {
  /** LISTEN is in place: notifications reach `onMessage`. False while (re)connecting. */
  readonly connected: boolean;
  close(): Promise<void>;
}

export interface ListenOptions {
  /** A session connection: LISTEN does not survive a transaction pooler (DATABASE_DIRECT_URL). */
  url: string;
  channel: string;
  onMessage(payload: string): void;
  /** Called after every (re)connection, once LISTEN is in place: notifications sent meanwhile were missed. */
  onConnected?(): void;
  onError?(error: unknown): void;
  /** Delay before reconnecting after the connection is lost. */
  retryMs?: number;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * LISTENs on `channel` over a dedicated pg.Client, reconnecting (after `retryMs`) whenever the connection drops.
 * The client is kept out of the pool: a pooled connection would be handed to queries and lose its LISTEN.
 */
export function listen(options: ListenOptions): Listener {
  if (!IDENTIFIER.test(options.channel)) throw new Error(`not a plain channel name: ${options.channel}`);
  const retryMs = options.retryMs ?? 1000;
  let closed = false;
  let connected = false;
  let client: pg.Client | undefined;
  let timer: NodeJS.Timeout | undefined;

  const reconnect = (error?: unknown) => {
    if (error !== undefined) options.onError?.(error);
    connected = false;
    const dead = client;
    client = undefined;
    dead?.removeAllListeners();
    dead?.on('error', () => {});
    void dead?.end().catch(() => {});
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, retryMs);
    timer.unref();
  };

  async function connect(): Promise<void> {
    if (closed) return;
    const next = new pg.Client({ connectionString: options.url });
    client = next;
    next.on('error', reconnect);
    next.on('end', () => {
      if (client === next) reconnect(new Error('the LISTEN connection ended'));
    });
    next.on('notification', (message) => {
      if (message.channel === options.channel) options.onMessage(message.payload ?? '');
    });
    try {
      await next.connect();
      await next.query(`listen ${options.channel}`);
      if (closed) {
        await next.end();
        return;
      }
      connected = true;
      options.onConnected?.();
    } catch (error) {
      if (client === next) reconnect(error);
    }
  }

  void connect();
  return {
    get connected() {
      return connected;
    },
    async close() {
      closed = true;
      connected = false;
      if (timer) clearTimeout(timer);
      const last = client;
      client = undefined;
      if (last) {
        last.removeAllListeners();
        last.on('error', () => {});
        await last.end().catch(() => {});
      }
    },
  };
}
