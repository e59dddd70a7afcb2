import http from 'node:http';

/** One server-sent event as a client sees it. */
export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

export interface SseStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body of a non-200 answer. */
  body: string;
  /** Every event received so far, in order. */
  events: SseEvent[];
  /** Comment lines (`: keep-alive`) received so far. */
  comments: string[];
  retry: number | undefined;
  /** Resolves with the first event (received before or after the call) that matches; rejects after timeoutMs. */
  next(match: (event: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  /** Resolves when the server has ended the stream (rejects after timeoutMs). */
  ended(timeoutMs?: number): Promise<void>;
  isEnded(): boolean;
  close(): void;
}

/**
 * Opens an event stream over a real socket and parses it as a browser's EventSource would (fields `id`, `event`,
 * `data`, `retry`; comments), keeping everything received for the test to inspect.
 */
export function openSse(
  base: string,
  path: string,
  /** localAddress: the loopback address to connect from (127.0.0.2, …), a client address of its own. */
  options: { token?: string; lastEventId?: string; headers?: Record<string, string>; localAddress?: string } = {},
): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, {
      ...(options.localAddress ? { localAddress: options.localAddress } : {}),
      headers: {
        accept: 'text/event-stream',
        ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        ...(options.lastEventId !== undefined ? { 'last-event-id': options.lastEventId } : {}),
        ...options.headers,
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let ended = false;
      const waiters = new Set<() => void>();
      const notify = () => {
        for (const waiter of [...waiters]) waiter();
      };
      const stream: SseStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        body: '',
        events: [],
        comments: [],
        retry: undefined,
        next(match, timeoutMs = 5000) {
          return new Promise((resolveEvent, rejectEvent) => {
            const check = () => {
              const found = stream.events.find(match);
              if (found) finish(() => resolveEvent(found));
              else if (ended) finish(() => rejectEvent(new Error(`stream ended without the awaited event; got ${JSON.stringify(stream.events)}`)));
            };
            const timer = setTimeout(
              () => finish(() => rejectEvent(new Error(`no matching event within ${timeoutMs} ms; got ${JSON.stringify(stream.events)}`))),
              timeoutMs,
            );
            const finish = (settle: () => void) => {
              clearTimeout(timer);
              waiters.delete(check);
              settle();
            };
            waiters.add(check);
            check();
          });
        },
        ended(timeoutMs = 5000) {
          return new Promise((resolveEnd, rejectEnd) => {
            const check = () => {
              if (ended) finish(resolveEnd);
            };
            const timer = setTimeout(() => finish(() => rejectEnd(new Error(`stream still open after ${timeoutMs} ms`))), timeoutMs);
            const finish = (settle: () => void) => {
              clearTimeout(timer);
              waiters.delete(check);
              settle();
            };
            waiters.add(check);
            check();
          });
        },
        isEnded: () => ended,
        close() {
          req.destroy();
        },
      };
      res.setEncoding('utf8');
      let buffer = '';
      let current: { id?: string; event?: string; data: string[] } = { data: [] };
      let lastId: string | undefined;
      res.on('data', (chunk: string) => {
        if (stream.status !== 200) {
          stream.body += chunk;
          return;
        }
        buffer += chunk;
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline).replace(/\r$/, '');
          buffer = buffer.slice(newline + 1);
          if (line === '') {
            if (current.id !== undefined) lastId = current.id;
            if (current.data.length > 0 || current.event !== undefined) {
              stream.events.push({ id: current.id ?? lastId, event: current.event ?? 'message', data: current.data.join('\n') });
            }
            current = { data: [] };
          } else if (line.startsWith(':')) {
            stream.comments.push(line);
          } else {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'id') current.id = value;
            else if (field === 'event') current.event = value;
            else if (field === 'data') current.data.push(value);
            else if (field === 'retry') stream.retry = Number(value);
          }
        }
        notify();
      });
      const end = () => {
        ended = true;
        notify();
      };
      res.on('end', end);
      res.on('close', end);
      res.on('error', end);
      resolve(stream);
    });
    req.end();
  });
}
