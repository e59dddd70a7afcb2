import type { FastifyBaseLogger } from 'fastify';
import type { Subscriber, Subscribers, Who } from './registry.js';

export type FindCaller = (tokenHash: string) => Promise<Who | undefined>;

/** Writes a comment to every stream nothing was written to for `heartbeatMs`, so proxies keep the connection. */
export function heartbeat(subscribers: Subscribers, heartbeatMs: number): void {
  const due = Date.now() - heartbeatMs;
  for (const sub of subscribers) {
    if (sub.lastWrite <= due) subscribers.write(sub, ': keep-alive\n\n');
  }
}

/** Looks every stream's token up again: one revoked or expired (or an admin no longer admin) ends its streams. */
export async function recheck(subscribers: Subscribers, findCaller: FindCaller, log: FastifyBaseLogger): Promise<void> {
  const byToken = new Map<string, Subscriber[]>();
  for (const sub of subscribers) {
    if (!sub.caller) continue;
    const list = byToken.get(sub.caller.tokenHash) ?? [];
    list.push(sub);
    byToken.set(sub.caller.tokenHash, list);
  }
  for (const [hash, subs] of byToken) {
    let caller: Who | undefined;
    try {
      caller = await findCaller(hash);
    } catch (error) {
      log.warn({ err: error }, 'event stream token re-check failed');
      return;
    }
    for (const sub of subs) {
      if (sub.closed) continue;
      if (!caller) subscribers.drop(sub, 'revoked');
      else if (sub.kind === 'posts') sub.viewer = caller;
      else if (sub.viewer?.id !== caller.id && caller.role !== 'admin') subscribers.drop(sub, 'revoked');
    }
  }
}
