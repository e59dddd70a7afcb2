// The few parts of autocannon's programmatic API the fallback load generator uses (the package ships no types).
declare module 'autocannon' {
  interface RawRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
  }
  interface Options {
    url: string;
    connections: number;
    duration: number;
    timeout?: number;
    requests?: (RawRequest & { setupRequest?: (request: RawRequest) => RawRequest })[];
  }
  interface Histogram {
    p50: number;
    p99: number;
    total: number;
  }
  interface Result {
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    latency: Histogram;
    requests: Histogram;
  }
  function autocannon(options: Options): Promise<Result>;
  export default autocannon;
}
