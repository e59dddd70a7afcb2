import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('loadConfig PUBLIC_URL', () => {
  it.each([
    ['http://localhost:3000', 'http://localhost:3000'],
    ['https://api.example.org/corkboard/', 'https://api.example.org/corkboard'],
    ['http://[::1]:8080', 'http://[::1]:8080'],
    ['https://example.org/a%20b/~team', 'https://example.org/a%20b/~team'],
  ])('accepts %s as %s (trailing slashes dropped)', (value, expected) => {
    expect(loadConfig({ PUBLIC_URL: value }).publicUrl).toBe(expected);
  });

  // Links are written into JSON without escaping and into Link headers between < and >, so the base URL may hold
  // only characters a URL carries unencoded.
  it.each(['http://exa"mple.org', 'http://example.org/a b', 'http://example.org/<x>', 'http://example.org/\\x', 'http://exämple.org', 'ftp://example.org', 'http://example.org/?q=1', 'http://example.org/#top'])(
    'rejects %s, naming PUBLIC_URL',
    (value) => {
      expect(() => loadConfig({ PUBLIC_URL: value })).toThrow(ConfigError);
      expect(() => loadConfig({ PUBLIC_URL: value })).toThrow(/^PUBLIC_URL: /);
    },
  );
});

describe('loadConfig messages', () => {
  it.each([
    ['LOG_LEVEL', 'loud', 'LOG_LEVEL: must be one of: fatal, error, warn, info, debug, trace, silent'],
    ['DATABASE_URL', 'mysql://x', 'DATABASE_URL: must be sqlite:<file> or postgres://user:password@host:5432/database'],
    ['PUBLIC_URL', 'ftp://x', 'PUBLIC_URL: must be an absolute http or https URL of plain URL characters, such as https://api.example.com'],
  ])('%s=%s says what the value must be, not a pattern', (name, value, message) => {
    expect(() => loadConfig({ [name]: value })).toThrow(message);
  });
});

describe('loadConfig REDIS_URL and REDIS_KEY_PREFIX', () => {
  it('leaves Redis off by default, with the corkboard: key prefix', () => {
    const config = loadConfig({});
    expect(config.redisUrl).toBeUndefined();
    expect(config.redisKeyPrefix).toBe('corkboard:');
  });

  it.each(['redis://127.0.0.1:6379', 'rediss://user:secret@cache.example.org:6380/2'])('accepts %s', (value) => {
    expect(loadConfig({ REDIS_URL: value, REDIS_KEY_PREFIX: 'svc-a:' })).toMatchObject({ redisUrl: value, redisKeyPrefix: 'svc-a:' });
  });

  it.each(['127.0.0.1:6379', 'http://127.0.0.1:6379', 'redis://', 'redis://host name'])('rejects REDIS_URL=%s, naming it and not echoing it', (value) => {
    expect(() => loadConfig({ REDIS_URL: value })).toThrow(/^REDIS_URL: /);
    expect(() => loadConfig({ REDIS_URL: value })).not.toThrow(value);
  });

  it('takes an empty REDIS_KEY_PREFIX as unset, like every variable', () => {
    expect(loadConfig({ REDIS_KEY_PREFIX: '' }).redisKeyPrefix).toBe('corkboard:');
  });

  it.each(['with space', 'x'.repeat(65), 'slash/'])('rejects REDIS_KEY_PREFIX=%s, naming it', (value) => {
    expect(() => loadConfig({ REDIS_KEY_PREFIX: value })).toThrow(/^REDIS_KEY_PREFIX: /);
  });
});

describe('loadConfig METRICS_TOKEN', () => {
  it('has no default: unset or empty, /metrics is open', () => {
    expect(loadConfig({}).metricsToken).toBeUndefined();
    expect(loadConfig({ METRICS_TOKEN: '' }).metricsToken).toBeUndefined();
  });

  it.each(['0123456789abcdef', 'a'.repeat(256), 'YWJjZGVmZ2hpamtsbW5vcA=='])('accepts %s', (value) => {
    expect(loadConfig({ METRICS_TOKEN: value }).metricsToken).toBe(value);
  });

  it.each(['short', 'a'.repeat(257), 'has a space in it!!', 'quote"quote"quote"', 'x'.repeat(15)])('rejects METRICS_TOKEN=%s, naming it but not echoing it', (value) => {
    let message = '';
    try {
      loadConfig({ METRICS_TOKEN: value });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      message = (error as Error).message;
    }
    expect(message).toMatch(/^METRICS_TOKEN: must be 16 to 256 of /);
    expect(message).not.toContain(value);
  });
});

describe('loadConfig TRUST_PROXY', () => {
  it.each([
    [undefined, false],
    ['off', false],
    ['0', false],
    // `on` is one hop (a single reverse proxy), never "trust every hop": the leftmost entry is the client's text.
    ['on', 1],
    ['2', 2],
    ['10.0.0.0/8, 127.0.0.1', ['10.0.0.0/8', '127.0.0.1']],
    ['::1,fd00::/8,loopback', ['::1', 'fd00::/8', 'loopback']],
  ])('TRUST_PROXY=%s is %j', (value, expected) => {
    expect(loadConfig({ TRUST_PROXY: value }).trustProxy).toEqual(expected);
  });

  it.each(['maybe', '10.0.0.0/33', '999.1.1.1', '1.2.3.4,', '-1', '256', 'fd00::/129', '10.0.0.1/8/1'])('rejects TRUST_PROXY=%s, naming it', (value) => {
    expect(() => loadConfig({ TRUST_PROXY: value })).toThrow(/^TRUST_PROXY: /);
  });
});

describe('loadConfig REQUEST_TIMEOUT_MS and SHUTDOWN_GRACE_MS', () => {
  it('defaults to 30 s and 10 s', () => {
    const config = loadConfig({});
    expect(config.requestTimeoutMs).toBe(30_000);
    expect(config.shutdownGraceMs).toBe(10_000);
  });

  it.each([
    ['REQUEST_TIMEOUT_MS', 'soon'],
    ['REQUEST_TIMEOUT_MS', '0'],
    ['REQUEST_TIMEOUT_MS', '50'],
    ['SHUTDOWN_GRACE_MS', '-1'],
    ['SHUTDOWN_GRACE_MS', '1.5'],
    ['TOKEN_TTL_SECONDS', '59'],
    // Past ten years: an expiry a date cannot hold made every sign-in a 500.
    ['TOKEN_TTL_SECONDS', '315360001'],
    ['TOKEN_TTL_SECONDS', '99999999999999999999'],
  ])('rejects %s=%s, naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^${name}: `));
  });
});

describe('loadConfig live streams (STREAM_*)', () => {
  it('defaults to a 15 s heartbeat, 5 streams per user, 10,000 per process, a 30 s token re-check, 1 h of events', () => {
    const config = loadConfig({});
    expect(config.streamHeartbeatSeconds).toBe(15);
    expect(config.streamMaxPerUser).toBe(5);
    expect(config.streamMax).toBe(10_000);
    expect(config.streamAuthRecheckSeconds).toBe(30);
    expect(config.streamRetentionSeconds).toBe(3600);
  });

  it.each([
    ['STREAM_HEARTBEAT_SECONDS', '0'],
    ['STREAM_HEARTBEAT_SECONDS', 'often'],
    ['STREAM_MAX_PER_USER', '0'],
    ['STREAM_MAX', '-5'],
    ['STREAM_MAX', '1e4'],
    ['STREAM_AUTH_RECHECK_SECONDS', '61'],
    ['STREAM_RETENTION_SECONDS', '60'],
  ])('rejects %s=%s, naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^${name}: `));
  });
});

describe('loadConfig IDEMPOTENCY_TTL_SECONDS', () => {
  it('keeps idempotent answers for a day by default', () => {
    expect(loadConfig({}).idempotencyTtlSeconds).toBe(86_400);
    expect(loadConfig({ IDEMPOTENCY_TTL_SECONDS: '60' }).idempotencyTtlSeconds).toBe(60);
  });

  it.each(['0', '-5', '2592001', 'a day', '1.5'])('rejects IDEMPOTENCY_TTL_SECONDS=%s, naming it', (value) => {
    expect(() => loadConfig({ IDEMPOTENCY_TTL_SECONDS: value })).toThrow(/^IDEMPOTENCY_TTL_SECONDS: /);
  });
});

describe.each([
  ['SQLITE_GROUP_COMMIT', 'sqliteGroupCommit'],
  ['SQLITE_BACKGROUND_CHECKPOINT', 'sqliteBackgroundCheckpoint'],
] as const)('loadConfig %s', (name, key) => {
  it.each([
    [undefined, true],
    ['on', true],
    ['off', false],
    ['OFF', false],
    ['false', false],
  ])(`${name}=%s is %s`, (value, expected) => {
    expect(loadConfig({ [name]: value })[key]).toBe(expected);
  });

  it.each(['sometimes', '2'])(`rejects ${name}=%s, naming it`, (value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^${name}: `));
  });
});

describe('loadConfig ADMIN_USERNAME and ADMIN_PASSWORD', () => {
  it('takes a bootstrap admin held to the sign-up rules', () => {
    const config = loadConfig({ ADMIN_USERNAME: 'root_admin', ADMIN_PASSWORD: 'long enough' });
    expect(config).toMatchObject({ adminUsername: 'root_admin', adminPassword: 'long enough' });
  });

  it.each([
    ['ADMIN_USERNAME', { ADMIN_USERNAME: 'ab', ADMIN_PASSWORD: 'long enough' }],
    ['ADMIN_USERNAME', { ADMIN_USERNAME: 'bad-name', ADMIN_PASSWORD: 'long enough' }],
    ['ADMIN_PASSWORD', { ADMIN_USERNAME: 'root_admin', ADMIN_PASSWORD: 'short' }],
    ['ADMIN_PASSWORD', { ADMIN_USERNAME: 'root_admin', ADMIN_PASSWORD: 'x'.repeat(257) }],
    ['ADMIN_PASSWORD', { ADMIN_USERNAME: 'root_admin' }],
  ])('rejects a bad %s, naming it', (name, env) => {
    expect(() => loadConfig(env)).toThrow(new RegExp(`^${name}: `));
  });
});

describe('loadConfig DATABASE_URL, DATABASE_DIRECT_URL and HOST', () => {
  it.each([
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:notaport/x'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_DIRECT_URL', 'postgres://host:99999999/db'],
    ['HOST', 'bad host'],
    ['HOST', 'a/b'],
  ])('rejects %s=%s, naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^${name}: `));
  });

  it.each(['127.0.0.1', '0.0.0.0', '::', '::1', 'localhost', 'api.internal'])('takes HOST=%s', (host) => {
    expect(loadConfig({ HOST: host }).host).toBe(host);
  });
});

describe('loadConfig OpenTelemetry (OTEL_*)', () => {
  it('leaves tracing off when no OTLP endpoint is set', () => {
    expect(loadConfig({}).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_SERVICE_NAME: 'x' }).tracing).toBeUndefined();
  });

  it('adds /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT and takes OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      serviceName: 'corkboard',
    });
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/traces', OTEL_SERVICE_NAME: 'api' }).tracing,
    ).toEqual({ endpoint: 'https://b/traces', serviceName: 'api' });
  });

  it('is off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).tracing).toBeUndefined();
  });

  it.each([
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /^OTEL_EXPORTER_OTLP_ENDPOINT: must be an http or https URL/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://c/v1/traces' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be an http or https URL/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'zipkin' }, /^OTEL_TRACES_EXPORTER: must be "otlp" or "none"/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTEL_EXPORTER_OTLP_PROTOCOL: must be "http\/json"/],
  ])('refuses %o, naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});
