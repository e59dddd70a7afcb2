import net from 'node:net';

/** What came back on a raw connection: the bytes, and how it ended. */
export interface RawOutcome {
  text: string;
  /** `close` when the server ended the connection, `error:<code>` when it was reset. */
  ending: string;
  /** Milliseconds from connecting to the end of the connection. */
  ms: number;
}

/** Opens a raw connection to a port, for requests no HTTP client would send. */
export function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Collects everything the server sends on `socket` until the connection ends (or `timeoutMs`, then destroys it). */
export function collect(socket: net.Socket, timeoutMs = 10_000): Promise<RawOutcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    let text = '';
    let ending = 'close';
    const timer = setTimeout(() => {
      ending = 'timeout';
      socket.destroy();
    }, timeoutMs);
    socket.setEncoding('latin1');
    socket.removeAllListeners('error');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => (ending = `error:${error.code}`));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, ending, ms: Date.now() - started });
    });
  });
}

/** Sends `request` on a new connection and returns the answer, the server's way of ending and the time taken. */
export async function rawRequest(port: number, request: string, timeoutMs?: number): Promise<RawOutcome> {
  const socket = await connect(port);
  const outcome = collect(socket, timeoutMs);
  socket.write(request);
  return outcome;
}

/** The status, lower-cased headers and body of the first response in raw bytes. */
export function parseResponse(text: string): { status: number; headers: Record<string, string>; body: string } {
  const end = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: text.slice(end + 4) };
}

/** Resident memory of a process in MiB (Linux: /proc/<pid>/status). */
export async function rssMiB(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}
