import { Redis } from 'ioredis';

export interface Wakeup {
  /** Tells every process that events have committed (a reference, never a body). */
  publish(): void;
  /** Whether this process is subscribed now: while it is not, it hears nothing of other processes' commits. */
  readonly connected: boolean;
  close(): Promise<void>;
}

/**
 * The cross-process wake-up of live streams through Redis pub/sub (when REDIS_URL is set), instead of PostgreSQL's
 * LISTEN, which needs a session connection. One connection subscribes (ioredis subscribes again after a
 * reconnect, and `onConnected` then lets the caller catch up on what it missed), another publishes. `connected` is
 * true only from the confirmation of the subscription to the loss of the connection, so the caller can make up
 * for Redis being down (see streams.plugin.ts).
 */
export function redisWakeup(options: {
  url: string;
  channel: string;
  onMessage(): void;
  onConnected(): void;
  onError(error: unknown): void;
}): Wakeup {
  const common = { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true } as const;
  const subscriber = new Redis(options.url, { ...common, enableOfflineQueue: true });
  const publisher = new Redis(options.url, common);
  subscriber.on('error', options.onError);
  publisher.on('error', () => {});
  subscriber.on('message', (channel: string) => {
    if (channel === options.channel) options.onMessage();
  });
  let connected = false;
  // On every (re)connection: ioredis resubscribes by itself but does not wait for it before 'ready', so subscribe
  // (again: harmless) and count as connected only once Redis has confirmed it.
  subscriber.on('ready', () => {
    subscriber
      .subscribe(options.channel)
      .then(() => {
        connected = true;
        options.onConnected();
      })
      .catch(options.onError);
  });
  subscriber.on('close', () => {
    connected = false;
  });
  void subscriber.connect().catch(options.onError);
  void publisher.connect().catch(() => {});
  return {
    get connected() {
      return connected;
    },
    publish() {
      publisher.publish(options.channel, '').catch(options.onError);
    },
    async close() {
      subscriber.disconnect();
      publisher.disconnect();
    },
  };
}
