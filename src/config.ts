import { compile as compileTrust } from '@fastify/proxy-addr';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { URL_CHARACTER_CLASS } from './shared/links.js';
import { USERNAME_PATTERN } from './shared/schemas.js';

/** pino's levels, `silent` included. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * The whole configuration, read from the environment in this one place (CONTRACT §5).
 * Every value is validated at start-up; a bad one stops the process with a message that names the variable.
 */
export const ConfigSchema = Type.Object({
  port: Type.Integer({ minimum: 0, maximum: 65535 }),
  /** An IP address or a host name (letters, digits, hyphens, dots), checked before listen() would fail on it. */
  host: Type.String({ pattern: '^([0-9A-Za-z.-]+|[0-9A-Fa-f:.]+(%[0-9A-Za-z]+)?)$' }),
  /** `sqlite:<path>`, `sqlite::memory:` or `postgres://…` */
  databaseUrl: Type.String({ pattern: '^(sqlite:.+|postgres(ql)?://.+)$' }),
  /** PostgreSQL: the session connection for migrations (and LISTEN), when databaseUrl goes through a pooler. */
  databaseDirectUrl: Type.Optional(Type.String({ pattern: '^postgres(ql)?://.+$' })),
  /** PostgreSQL: name statements so each is prepared once per connection; off behind a transaction pooler. */
  pgPreparedStatements: Type.Boolean(),
  /** SQLite: the write transactions queued together share one COMMIT, each in a savepoint (group commit). */
  sqliteGroupCommit: Type.Boolean(),
  /** SQLite: the WAL is checkpointed by a thread of its own, not inside a request's COMMIT. */
  sqliteBackgroundCheckpoint: Type.Boolean(),
  /** Longest a statement may run or wait for a lock (a 503 with Retry-After for the client). */
  dbStatementTimeoutMs: Type.Integer({ minimum: 100, maximum: 600_000 }),
  /**
   * Base of every link href and Location header; never taken from the request's Host header. Only characters a URL
   * may carry unencoded (RFC 3986), so a link never breaks a Link header's `<…>`.
   */
  publicUrl: Type.String({ pattern: `^https?://[${URL_CHARACTER_CLASS}\\[\\]]+(/[${URL_CHARACTER_CLASS}/]*)?$` }),
  adminUsername: Type.Optional(Type.String()),
  adminPassword: Type.Optional(Type.String()),
  rateLimit: Type.Object({
    enabled: Type.Boolean(),
    /** Requests per window per client for ordinary routes. */
    max: Type.Integer({ minimum: 1 }),
    /** Requests per window per client for sign-up, token creation and password change (password guessing). */
    authMax: Type.Integer({ minimum: 1 }),
    windowMs: Type.Integer({ minimum: 1000 }),
  }),
  logLevel: Type.Union(LOG_LEVELS.map((l) => Type.Literal(l))),
  /** At most ten years: a token's expiry must stay a date the databases can store and compare. */
  tokenTtlSeconds: Type.Integer({ minimum: 60, maximum: 315_360_000 }),
  /** How long the answer to a create sent with an Idempotency-Key is kept for replay (CONTRACT §6.2); at most 30 days. */
  idempotencyTtlSeconds: Type.Integer({ minimum: 1, maximum: 2_592_000 }),
  bodyLimit: Type.Integer({ minimum: 1024 }),
  /** Argon2id memory cost in KiB; 19456 (19 MiB) is OWASP's recommended minimum. Lower only for tests. */
  passwordHashMemoryKib: Type.Integer({ minimum: 64, maximum: 4_194_304 }),
  pgPoolMax: Type.Integer({ minimum: 1, maximum: 1000 }),
  /**
   * Shared state for several processes (rate-limit counters, each user's open streams, stream wake-ups); unset:
   * each process counts in memory and is woken through PostgreSQL.
   */
  redisUrl: Type.Optional(Type.String({ pattern: '^rediss?://[^\\s]+$' })),
  /**
   * When set, GET /metrics needs `Authorization: Bearer <metricsToken>`. A bearer token (token68 characters), long
   * enough not to be guessed; no default (a secret).
   */
  metricsToken: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._~+/-]{16,256}={0,2}$' })),
  /** Prefix of every Redis key the service writes, so several deployments (or test runs) can share one Redis. */
  redisKeyPrefix: Type.String({ pattern: '^[A-Za-z0-9:._-]{0,64}$' }),
  /**
   * Which proxies in front of the service are trusted to append to X-Forwarded-For: `false` (none), a hop count,
   * or addresses/CIDRs. The client address is then the rightmost untrusted entry (CONTRACT §2).
   */
  trustProxy: Type.Union([Type.Literal(false), Type.Integer({ minimum: 1, maximum: 255 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })]),
  /** A request whose headers and body have not fully arrived in this time is answered 408 and closed (CONTRACT §5). */
  requestTimeoutMs: Type.Integer({ minimum: 100, maximum: 3_600_000 }),
  /** SIGTERM: how long in-flight requests may take to finish before the connections still open are cut off. */
  shutdownGraceMs: Type.Integer({ minimum: 0, maximum: 600_000 }),
  /** Live streams (CONTRACT §7): a `: keep-alive` comment after this many seconds without an event. */
  streamHeartbeatSeconds: Type.Integer({ minimum: 1, maximum: 3600 }),
  /**
   * Open streams per signed-in user, and per client address for streams opened without a token (more: 429): across
   * processes with REDIS_URL, else per process.
   */
  streamMaxPerUser: Type.Integer({ minimum: 1, maximum: 10_000 }),
  /** Open streams per process (more: 503 with Retry-After); a tenth is kept for signed-in users (streams.plugin.ts). */
  streamMax: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  /** How often the token of an open stream is checked again; a revoked or expired one ends the stream. */
  streamAuthRecheckSeconds: Type.Integer({ minimum: 1, maximum: 60 }),
  /** How long stream events are kept for resuming (at least an hour, CONTRACT §7). */
  streamRetentionSeconds: Type.Integer({ minimum: 3600, maximum: 30 * 24 * 3600 }),
  /** OpenTelemetry tracing (src/tracing.ts), from the standard OTEL_* variables; unset: off. */
  tracing: Type.Optional(
    Type.Object({
      /** The OTLP/HTTP traces URL. */
      endpoint: Type.String({ pattern: '^https?://[^\\s]+$' }),
      serviceName: Type.String({ minLength: 1, maxLength: 256 }),
    }),
  ),
});

export type Config = Static<typeof ConfigSchema>;

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(name, `must be an integer, got "${raw}"`);
  return Number(raw.trim());
}

function flag(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['on', 'true', '1', 'yes'].includes(raw)) return true;
  if (['off', 'false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(name, `must be "on" or "off", got "${env[name]}"`);
}

/** `redis://` or `rediss://` URL that the URL parser accepts (ioredis parses it the same way). */
function redisUrl(env: Env): string | undefined {
  const raw = env.REDIS_URL?.trim();
  if (raw === undefined || raw === '') return undefined;
  // The value is not echoed in the message: it may hold a password.
  if (!/^rediss?:\/\//.test(raw) || !URL.canParse(raw)) throw new ConfigError('REDIS_URL', 'must be a redis:// or rediss:// URL');
  return raw;
}

/**
 * TRUST_PROXY: `off` (the default: X-Forwarded-For is ignored), a hop count (`2`: the two proxies nearest the
 * service are trusted), or a comma-separated list of proxy addresses/CIDRs (`10.0.0.0/8, 127.0.0.1`). `on` means
 * one hop, a single reverse proxy in front: trusting every hop would make the leftmost entry, which the client
 * writes itself, its address.
 */
function trustProxy(env: Env): false | number | string[] {
  const raw = env.TRUST_PROXY?.trim() ?? '';
  const lower = raw.toLowerCase();
  if (['', 'off', 'false', 'no', '0'].includes(lower)) return false;
  if (['on', 'true', 'yes'].includes(lower)) return 1;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > 255) throw new ConfigError('TRUST_PROXY', `a hop count must be at most 255, got "${raw}"`);
    return hops;
  }
  const entries = raw.split(',').map((entry) => entry.trim());
  // Checked by the library that reads the list at run time (Fastify's trustProxy), so what starts is what it takes.
  const bad = entries.find((entry) => {
    try {
      compileTrust([entry]);
      return false;
    } catch {
      return true;
    }
  });
  if (bad !== undefined) {
    throw new ConfigError('TRUST_PROXY', `must be "off", "on" (1 hop), a hop count, or a comma-separated list of addresses/CIDRs; "${bad}" is none of these`);
  }
  return entries;
}

/** Maps a config path (as TypeBox reports it) back to the environment variable that feeds it. */
const VARIABLES: Record<string, string> = {
  '/port': 'PORT',
  '/host': 'HOST',
  '/databaseUrl': 'DATABASE_URL',
  '/databaseDirectUrl': 'DATABASE_DIRECT_URL',
  '/pgPreparedStatements': 'PG_PREPARED_STATEMENTS',
  '/sqliteGroupCommit': 'SQLITE_GROUP_COMMIT',
  '/sqliteBackgroundCheckpoint': 'SQLITE_BACKGROUND_CHECKPOINT',
  '/dbStatementTimeoutMs': 'DB_STATEMENT_TIMEOUT_MS',
  '/publicUrl': 'PUBLIC_URL',
  '/adminUsername': 'ADMIN_USERNAME',
  '/adminPassword': 'ADMIN_PASSWORD',
  '/rateLimit/enabled': 'RATE_LIMIT',
  '/rateLimit/max': 'RATE_LIMIT_MAX',
  '/rateLimit/authMax': 'RATE_LIMIT_AUTH_MAX',
  '/rateLimit/windowMs': 'RATE_LIMIT_WINDOW_MS',
  '/logLevel': 'LOG_LEVEL',
  '/tokenTtlSeconds': 'TOKEN_TTL_SECONDS',
  '/idempotencyTtlSeconds': 'IDEMPOTENCY_TTL_SECONDS',
  '/bodyLimit': 'BODY_LIMIT',
  '/passwordHashMemoryKib': 'PASSWORD_HASH_MEMORY_KIB',
  '/pgPoolMax': 'PG_POOL_MAX',
  '/trustProxy': 'TRUST_PROXY',
  '/redisUrl': 'REDIS_URL',
  '/redisKeyPrefix': 'REDIS_KEY_PREFIX',
  '/metricsToken': 'METRICS_TOKEN',
  '/requestTimeoutMs': 'REQUEST_TIMEOUT_MS',
  '/shutdownGraceMs': 'SHUTDOWN_GRACE_MS',
  '/streamHeartbeatSeconds': 'STREAM_HEARTBEAT_SECONDS',
  '/streamMaxPerUser': 'STREAM_MAX_PER_USER',
  '/streamMax': 'STREAM_MAX',
  '/streamAuthRecheckSeconds': 'STREAM_AUTH_RECHECK_SECONDS',
  '/streamRetentionSeconds': 'STREAM_RETENTION_SECONDS',
  '/tracing/endpoint': 'OTEL_EXPORTER_OTLP_ENDPOINT',
  '/tracing/serviceName': 'OTEL_SERVICE_NAME',
};

/** What a value that is not one of a few choices, or of a format, must be: for the operator, not a pattern. */
const FORMATS: Record<string, string> = {
  LOG_LEVEL: `must be one of: ${LOG_LEVELS.join(', ')}`,
  DATABASE_URL: 'must be sqlite:<file> or postgres://user:password@host:5432/database',
  DATABASE_DIRECT_URL: 'must be postgres://user:password@host:5432/database',
  PUBLIC_URL: 'must be an absolute http or https URL of plain URL characters, such as https://api.example.com',
  REDIS_KEY_PREFIX: 'must be at most 64 of A-Z a-z 0-9 : . _ -',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'must be an http or https URL, such as http://127.0.0.1:4318',
  OTEL_SERVICE_NAME: 'must be 1 to 256 characters',
  METRICS_TOKEN: 'must be 16 to 256 of A-Z a-z 0-9 . _ ~ + / - (a bearer token; `openssl rand -hex 32` makes one)',
};

/**
 * Tracing from the standard OpenTelemetry variables: on when an OTLP endpoint is set, unless OTEL_SDK_DISABLED is
 * true or OTEL_TRACES_EXPORTER is `none`. Spans go over OTLP/HTTP as JSON, the one protocol this build exports
 * (a collector takes it on the same port as protobuf). OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the full URL;
 * OTEL_EXPORTER_OTLP_ENDPOINT a base to which `/v1/traces` is added (the specification's rule).
 */
function tracing(env: Env): Config['tracing'] {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() || 'otlp';
  if (exporter === 'none') return undefined;
  if (exporter !== 'otlp') throw new ConfigError('OTEL_TRACES_EXPORTER', `must be "otlp" or "none", got "${env.OTEL_TRACES_EXPORTER}"`);
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const protocol = env[name]?.trim();
    if (protocol && protocol !== 'http/json') throw new ConfigError(name, `must be "http/json" (the protocol this build exports), got "${protocol}"`);
  }
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!traces && !base) return undefined;
  const endpoint = traces || `${base!.replace(/\/+$/, '')}/v1/traces`;
  if (!URL.canParse(endpoint) || !/^https?:$/.test(new URL(endpoint).protocol)) {
    throw new ConfigError(traces ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT', 'must be an http or https URL, such as http://127.0.0.1:4318');
  }
  return { endpoint, serviceName: env.OTEL_SERVICE_NAME?.trim() || 'corkboard' };
}

export function loadConfig(env: Env = process.env): Readonly<Config> {
  const port = integer(env, 'PORT', 3000);
  const adminUsername = env.ADMIN_USERNAME || undefined;
  const adminPassword = env.ADMIN_PASSWORD || undefined;
  if ((adminUsername === undefined) !== (adminPassword === undefined)) {
    throw new ConfigError(adminUsername ? 'ADMIN_PASSWORD' : 'ADMIN_USERNAME', 'ADMIN_USERNAME and ADMIN_PASSWORD must be set together');
  }
  // The bootstrap admin is held to the rules of a sign-up (CONTRACT §3), so it can sign in and PUT itself back.
  if (adminUsername !== undefined && !new RegExp(USERNAME_PATTERN).test(adminUsername)) {
    throw new ConfigError('ADMIN_USERNAME', 'must be 3 to 32 letters, digits or underscores');
  }
  if (adminPassword !== undefined && ([...adminPassword].length < 8 || [...adminPassword].length > 256)) {
    throw new ConfigError('ADMIN_PASSWORD', 'must be 8 to 256 characters');
  }
  for (const name of ['DATABASE_URL', 'DATABASE_DIRECT_URL']) {
    const value = env[name];
    if (value && /^postgres(ql)?:/.test(value) && !URL.canParse(value)) throw new ConfigError(name, 'is not a valid postgres:// URL');
  }
  const config = {
    port,
    host: env.HOST || '127.0.0.1',
    databaseUrl: env.DATABASE_URL || 'sqlite:data/corkboard.db',
    databaseDirectUrl: env.DATABASE_DIRECT_URL || undefined,
    pgPreparedStatements: flag(env, 'PG_PREPARED_STATEMENTS', true),
    sqliteGroupCommit: flag(env, 'SQLITE_GROUP_COMMIT', true),
    sqliteBackgroundCheckpoint: flag(env, 'SQLITE_BACKGROUND_CHECKPOINT', true),
    dbStatementTimeoutMs: integer(env, 'DB_STATEMENT_TIMEOUT_MS', 5000),
    publicUrl: (env.PUBLIC_URL || `http://localhost:${port}`).replace(/\/+$/, ''),
    adminUsername,
    adminPassword,
    rateLimit: {
      enabled: flag(env, 'RATE_LIMIT', true),
      max: integer(env, 'RATE_LIMIT_MAX', 600),
      authMax: integer(env, 'RATE_LIMIT_AUTH_MAX', 20),
      windowMs: integer(env, 'RATE_LIMIT_WINDOW_MS', 60_000),
    },
    logLevel: (env.LOG_LEVEL || 'info').toLowerCase(),
    tokenTtlSeconds: integer(env, 'TOKEN_TTL_SECONDS', 7 * 24 * 3600),
    idempotencyTtlSeconds: integer(env, 'IDEMPOTENCY_TTL_SECONDS', 86_400),
    bodyLimit: integer(env, 'BODY_LIMIT', 256 * 1024),
    passwordHashMemoryKib: integer(env, 'PASSWORD_HASH_MEMORY_KIB', 19_456),
    pgPoolMax: integer(env, 'PG_POOL_MAX', 10),
    redisUrl: redisUrl(env),
    redisKeyPrefix: env.REDIS_KEY_PREFIX || 'corkboard:',
    metricsToken: env.METRICS_TOKEN || undefined,
    trustProxy: trustProxy(env),
    requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 30_000),
    shutdownGraceMs: integer(env, 'SHUTDOWN_GRACE_MS', 10_000),
    streamHeartbeatSeconds: integer(env, 'STREAM_HEARTBEAT_SECONDS', 15),
    streamMaxPerUser: integer(env, 'STREAM_MAX_PER_USER', 5),
    streamMax: integer(env, 'STREAM_MAX', 10_000),
    streamAuthRecheckSeconds: integer(env, 'STREAM_AUTH_RECHECK_SECONDS', 30),
    streamRetentionSeconds: integer(env, 'STREAM_RETENTION_SECONDS', 3600),
    tracing: tracing(env),
  };
  return Object.freeze(parseConfig(config));
}

/** Validates an already-structured config (tests build theirs directly). */
export function parseConfig(candidate: unknown): Config {
  const first = Value.Errors(ConfigSchema, candidate)[0];
  if (first) {
    const variable = VARIABLES[first.instancePath] ?? (first.instancePath || 'config');
    throw new ConfigError(variable, FORMATS[variable] ?? first.message);
  }
  return candidate as Config;
}
