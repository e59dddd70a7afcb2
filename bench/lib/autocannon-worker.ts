import autocannon from 'autocannon';
import type { LoadResult, RequestSpec } from './load.js';

/**
 * The fallback load generator, run as its own (pinned) process so that it never shares the server's CPU:
 * argv[2] is the job as JSON; prints one `BENCH_RESULT {json}` line in the same shape as the wrk script.
 */
const job = JSON.parse(process.argv[2] ?? '{}') as { url: string; spec: RequestSpec; seconds: number; connections: number };
const { spec } = job;
const [prefix, suffix] = spec.path.includes('{id}') ? (spec.path.split('{id}') as [string, string]) : [spec.path, undefined];
const idMax = spec.idMax ?? 1;

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
      ...(suffix === undefined
        ? {}
        : {
            // Ids that are multiples of 10 are not public posts: step to the id below.
            setupRequest: (request) => {
              let k = 1 + Math.floor(Math.random() * idMax);
              if (k % 10 === 0) k -= 1;
              return { ...request, path: `${prefix}${k}${suffix}` };
            },
          }),
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
