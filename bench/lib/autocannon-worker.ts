import autocannon from 'autocannon';
import { followRequest, randomPaths, type LoadResult, type RequestSpec } from './load.js';

/**
 * The fallback load generator, run as its own (pinned) process so that it never shares the server's CPU:
 * argv[2] is the job as JSON; prints one `BENCH_RESULT {json}` line in the same shape as the wrk script.
 */
const job = JSON.parse(process.argv[2] ?? '{}') as { url: string; spec: RequestSpec; seconds: number; connections: number };
const { spec } = job;
const nextPath = randomPaths(spec);
const follows = spec.follows ?? { start: 0, followers: [], followees: [] };
let next = follows.start;

const result = await autocannon({
  url: job.url,
  connections: job.connections,
  duration: job.seconds,
  timeout: 5,
  requests: [
    {
      method: spec.method,
      path: spec.path.replace('{id}', '1'),
      headers: { ...(spec.body === undefined ? {} : { 'content-type': 'application/json' }), ...spec.headers },
      ...(spec.body === undefined ? {} : { body: spec.body }),
      ...(spec.follows
        ? {
            // One counter for every connection: each request is the next pair, never one sent before.
            setupRequest: (request) => ({ ...request, ...followRequest(follows, next++) }),
          }
        : spec.variants?.length
        ? {
            setupRequest: (request) => {
              const v = spec.variants?.[Math.floor(Math.random() * (spec.variants?.length ?? 1))];
              return v ? { ...request, path: v.path, headers: { ...request.headers, ...v.headers } } : request;
            },
          }
        : spec.path.includes('{id}')
          ? { setupRequest: (request) => ({ ...request, path: nextPath() }) }
          : {}),
    },
  ],
});

const out: LoadResult = {
  requests: result.requests.total,
  seconds: result.duration,
  rps: result.requests.total / result.duration,
  p50: result.latency.p50,
  p99: result.latency.p99,
  errors: result.errors + result.non2xx,
};
process.stdout.write(`BENCH_RESULT ${JSON.stringify(out)}\n`);
