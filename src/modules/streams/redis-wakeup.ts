import { Redis } from 'ioredis';

export interface Wakeup {
  /** Tells every process that events have committed (a reference, never a body). */
  publish(): void;
  close(): Promise<void>;
}

/**
 * The cross-process wake-up of live streams through Redis pub/sub (when REDIS_URL is set), instead of PostgreSQL's
 * LISTEN, which needs a session connection. One connection subscribes (ioredis subscribes again after a
 * reconnect, and `onConnected` then lets the caller catch up on what it missed), another publishes.
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
  subscriber.on('ready', options.onConnected);
  void subscriber
    .connect()
    .then(() => subscriber.subscribe(options.channel))
    .catch(options.onError);
  void publisher.connect().catch(() => {});
  return {
    publish() {
      publisher.publish(options.channel, '').catch(options.onError);
    },
    async close() {
      subscriber.disconnect();
      publisher.disconnect();
    },
  };
}
