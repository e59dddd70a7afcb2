import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';

/** A server under test: one process, pinned to the server CPU, with its resident memory sampled on demand. */
export interface ServerProcess {
  name: string;
  port: number;
  pid: number;
  /** Starts recording the maximum RSS; `stop` returns it in MB. */
  sampleRss(): { stop(): number };
  /** Current RSS in MB. */
  rss(): number;
  /** CPU time (user + system) the process has used so far, in seconds. */
  cpuSeconds(): number;
  /** Bytes the process has made the kernel fetch from storage so far (`read_bytes` of /proc/<pid>/io). */
  diskReadBytes(): number;
  stop(): Promise<void>;
  output(): string;
  /** Exit code or signal, once the process has ended. */
  exitStatus(): string | undefined;
}

/**
 * The command `npm start` runs, as words: `node`, its flags and the entry point. The script starts with `exec` so
 * that npm's shell hands its process to the server (a SIGTERM to npm reaches it); the benchmarks start the server
 * without npm, so that word is dropped here.
 */
export function npmStartCommand(): string[] {
  const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { scripts?: Record<string, string> };
  const script = pkg.scripts?.start ?? '';
  const words = script.trim().split(/\s+/);
  if (words[0] === 'exec') words.shift();
  if (words[0] !== 'node' || words.length < 2) throw new Error(`npm start is not "[exec] node …": ${script || '(none)'}`);
  return words;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

// /proc/<pid>/stat counts CPU time in clock ticks: USER_HZ, 100 on every Linux architecture in practice.
const CLOCK_TICKS = 100;

function readCpuSeconds(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces, hence the last ')'): utime is 14th, stime 15th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}

/** Reads that the page cache answered do not count here, only those that went to the block device. */
function readDiskBytes(pid: number): number {
  try {
    const match = /^read_bytes: (\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'));
    return match ? Number(match[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

function readRssMb(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match ? Number(match[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

export interface StartOptions {
  name: string;
  command: string[];
  env: Record<string, string>;
  port: number;
  /** e.g. ['taskset', '-c', '0']; empty when taskset is missing. */
  pin: string[];
  /** A path that answers once the server is ready (any HTTP status counts). */
  readyPath: string;
}

export async function startServer(options: StartOptions): Promise<ServerProcess> {
  const argv = [...options.pin, ...options.command];
  const command = argv[0] as string;
  const args = argv.slice(1);
  // taskset execs the program, so the child's pid is the server's own pid.
  const child: ChildProcess = spawn(command, args, {
    env: { ...process.env, ...options.env, PORT: String(options.port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const keep = (d: Buffer) => {
    log = (log + d.toString()).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited = false;
  let exitStatus: string | undefined;
  const exit = new Promise<void>((resolve) =>
    child.on('exit', (code, signal) => {
      exited = true;
      exitStatus = signal ?? `exit ${code}`;
      resolve();
    }),
  );
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${options.name}: could not start ${command}`);

  // Under valgrind start-up runs tens of times slower, and on a machine shared with other work it took over a minute.
  const startupMs = argv.includes('valgrind') ? 300_000 : 60_000;
  const deadline = Date.now() + startupMs;
  for (;;) {
    if (exited) throw new Error(`${options.name} exited during start-up:\n${log}`);
    try {
      await fetch(`http://127.0.0.1:${options.port}${options.readyPath}`);
      break;
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`${options.name} did not answer within ${startupMs / 1000} s:\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  return {
    name: options.name,
    port: options.port,
    pid,
    rss: () => readRssMb(pid),
    cpuSeconds: () => readCpuSeconds(pid),
    diskReadBytes: () => readDiskBytes(pid),
    sampleRss() {
      let max = readRssMb(pid);
      const timer = setInterval(() => {
        max = Math.max(max, readRssMb(pid));
      }, 200);
      return {
        stop() {
          clearInterval(timer);
          return Math.max(max, readRssMb(pid));
        },
      };
    },
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 15_000).unref());
      if ((await Promise.race([exit, timeout])) === 'timeout') {
        child.kill('SIGKILL');
        await exit;
      }
    },
    output: () => log,
    exitStatus: () => exitStatus,
  };
}

/** Runs a command to completion, inheriting stdio; throws on a non-zero exit. */
export function run(command: string, args: string[], options: { env?: Record<string, string>; quiet?: boolean } = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      env: { ...process.env, ...options.env },
      stdio: options.quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited ${code}\n${out}`))));
  });
}

/** The path of a program on PATH, if any. */
export function which(program: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const candidate = `${dir}/${program}`;
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Reads files from start to end so that their pages are in the page cache (what a server under steady load keeps
 * there). The kernel of this kind of VM pages out unmapped page cache that has not been touched for about a minute
 * (a DAMON "pageout" scheme, see /sys/kernel/mm/damon), so a scenario that ran after a minute of other scenarios
 * found its database half on disk, and measured the disk. Answers the seconds it took.
 */
export function warmPageCache(files: string[]): number {
  const started = process.hrtime.bigint();
  const buffer = Buffer.allocUnsafe(4 << 20);
  for (const file of files) {
    let fd: number;
    try {
      fd = fs.openSync(file, 'r');
    } catch {
      continue; // a -wal file that does not exist (yet)
    }
    try {
      while (fs.readSync(fd, buffer, 0, buffer.length, null) > 0);
    } finally {
      fs.closeSync(fd);
    }
  }
  return Number(process.hrtime.bigint() - started) / 1e9;
}
