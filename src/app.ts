import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from './config.js';
import { findCallerByTokenHash } from './modules/tokens/tokens.repository.js';
import { openStore } from './db/open.js';
import type { Store } from './db/store.js';
import { createLinks, type Links } from './shared/links.js';
import type { PostChanges } from './shared/post-changes.js';
import { createValidatorCompiler } from './plugins/validation.js';
import { AccessLog, createLogger, loggerOptions } from './plugins/logging.js';
import errorHandler, { ArrivingBodies, clientError, connectRequest, frameworkError } from './plugins/error-handler.js';
import httpHygienePlugin from './plugins/http-hygiene.js';
import routeDocsPlugin from './plugins/route-docs.js';
import jsonBodyPlugin from './plugins/json-body.js';
import compressionPlugin from './plugins/compression.js';
import databasePlugin from './plugins/database.js';
import authPlugin from './plugins/auth.js';
import securityPlugin from './plugins/security.js';
import conditionalPlugin from './shared/conditional.js';
import metricsPlugin from './plugins/metrics.js';
import rateLimitPlugin from './plugins/rate-limit/index.js';
import openapiPlugin from './plugins/openapi.js';
import idempotencyPlugin from './plugins/idempotency/index.js';
import fanoutPlugin from './modules/feed/feed.fanout.js';
import streamsPlugin from './modules/streams/streams.plugin.js';
import modules from './modules/index.js';
import searchMergePlugin from './modules/search/search.merge.js';
import tracingPlugin from './plugins/tracing.js';
import { startTracing } from './tracing.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: Readonly<Config>;
    links: Links;
    /** `store.postChanges`: the changes to posts that writes record, for the fan-out worker and live streams. */
    postChanges: PostChanges;
    /** Aborted when the app starts closing (SIGTERM): long-lived responses listen to it and end. */
    closing: AbortSignal;
    /** Starts shutting down: from now on every answer says `Connection: close`, and `closing` is aborted. */
    beginClose(): void;
  }
}

export interface BuildOptions {
  /** An open store (tests pass their own); by default one is opened from config.databaseUrl. */
  store?: Store;
  /** Run migrations while starting (default true). */
  migrate?: boolean;
  /** The logger (see plugins/logging.ts) or `false` for none; by default JSON lines on stdout at config.logLevel. */
  logger?: Logger | false;
}

// An incoming X-Request-Id is echoed only when it is short and plain, so logs cannot be forged or flooded through it.
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Generated request ids: 64 random bits chosen once per process, then a counter (`3f9c0a1b2c3d4e5f-1a`). Unique
 * across the processes behind a load balancer and across restarts, and ordered within a process.
 */
function requestIds(): () => string {
  const prefix = randomBytes(8).toString('hex');
  let counter = 0;
  return () => `${prefix}-${(++counter).toString(36)}`;
}

/** TRUST_PROXY as a hop count: the socket's peer and the n-1 entries of X-Forwarded-For nearest to it. */
const trustHops = (hops: number) => (_address: string, hop: number) => hop < hops;

/** Builds the whole application without listening: the server entry point, the tests and the benchmarks share it. */
export async function buildApp(config: Readonly<Config>, options: BuildOptions = {}): Promise<FastifyInstance> {
  const nextRequestId = requestIds();
  /** The path of each request whose body is still arriving, for the 408 that may cut it off (errors/framework.ts). */
  const arriving = new ArrivingBodies();
  const logger = options.logger === undefined ? createLogger(loggerOptions(config)) : options.logger || createLogger(false);
  const accessLog = new AccessLog();
  const app = Fastify({
    // Each request logs through a child carrying its id; one access-log line per request (plugins/logging.ts).
    loggerInstance: logger as FastifyBaseLogger,
    logController: accessLog,
    bodyLimit: config.bodyLimit,
    // A hop count as proxy-addr counts it: the socket's peer is hop 0, then X-Forwarded-For from the right.
    trustProxy: typeof config.trustProxy === 'number' ? trustHops(config.trustProxy) : config.trustProxy,
    // Node's requestTimeout counts from the first byte of a request until its body has fully arrived (headers
    // included; headersTimeout bounds the headers alone and may not exceed it). Node enforces both by sweeping its
    // connections every connectionsCheckingInterval (30 s by default): swept often enough that a short timeout holds.
    requestTimeout: config.requestTimeoutMs,
    http: {
      requestTimeout: config.requestTimeoutMs,
      headersTimeout: Math.min(60_000, config.requestTimeoutMs),
      connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(config.requestTimeoutMs / 4))),
      // A missing Host is answered by http-hygiene.ts in the service's error shape, with a request id.
      requireHostHeader: false,
    },
    requestIdHeader: false,
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : nextRequestId();
    },
    // Reject prototype pollution attempts in JSON bodies (`__proto__`, `constructor.prototype`) with a 400.
    // Duplicate keys are not rejected: JSON.parse keeps the last, as RFC 8259 allows.
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    routerOptions: { maxParamLength: 200 },
    frameworkErrors: frameworkError,
    clientErrorHandler: clientError(nextRequestId, arriving),
  }).withTypeProvider<TypeBoxTypeProvider>();
  // CONNECT never reaches Fastify: without a listener, Node drops the connection without a word.
  app.server.on('connect', connectRequest(app, nextRequestId));
  // `Expect: 100-continue` (RFC 9110 §10.1.1): Node's default answers `100 Continue` to every such request, which
  // invites the client to upload a body the limit then refuses. A body declared larger than the limit gets its
  // 413 instead, before any of it is sent (Fastify checks Content-Length before reading); others are told to go on.
  app.server.on('checkContinue', (req, res) => {
    if (!(Number(req.headers['content-length']) > config.bodyLimit)) res.writeContinue();
    app.server.emit('request', req, res);
  });

  app.setValidatorCompiler(createValidatorCompiler());
  // Bodies are JSON only (CONTRACT §1): without Fastify's built-in text/plain parser, any other type is a 415.
  app.removeContentTypeParser('text/plain');
  app.decorate('config', config);
  app.decorate('links', createLinks(config.publicUrl));

  // Graceful shutdown: close() reaps only the keep-alive connections that are idle at that moment. A connection
  // busy with an in-flight request would stay open after its response until the keep-alive timeout and hold the
  // process past its drain; answering `Connection: close` once closing has begun ends it with the response.
  // Long-lived responses (event streams) end themselves when `app.closing` aborts: when shutdown begins
  // (server.ts calls beginClose() on SIGTERM) or at the latest when close() starts. Whatever is still open after
  // SHUTDOWN_GRACE_MS is cut off (src/shutdown.ts), so no socket holds the process.
  const closing = new AbortController();
  app.decorate('closing', closing.signal);
  app.decorate('beginClose', () => closing.abort());
  app.addHook('preClose', async () => {
    closing.abort();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing.signal.aborted) reply.header('connection', 'close');
    done(null, payload);
  });

  // Tracing, when configured: first, so that the request's span covers every other hook.
  const tracing = config.tracing && startTracing(config.tracing, /^postgres/.test(config.databaseUrl) ? 'postgres' : 'sqlite');
  if (tracing) {
    await app.register(tracingPlugin, { completions: accessLog });
    app.addHook('onClose', () => tracing.shutdown());
  }
  await app.register(httpHygienePlugin);
  await app.register(errorHandler, { arriving });
  await app.register(routeDocsPlugin);
  await app.register(jsonBodyPlugin);
  // Before every route (and before Swagger UI's static files): it hooks each route as the route is declared.
  await app.register(compressionPlugin);
  // A database that cannot be opened (SQLite opens its file at once), migrated or read at start-up (missing,
  // unreachable, not a database at all) stops start-up with a message that names the variable (CONTRACT §5).
  let store: Store;
  try {
    store =
      options.store ??
      openStore(config.databaseUrl, {
        poolMax: config.pgPoolMax,
        directUrl: config.databaseDirectUrl,
        preparedStatements: config.pgPreparedStatements,
        statementTimeoutMs: config.dbStatementTimeoutMs,
        groupCommit: config.sqliteGroupCommit,
        backgroundCheckpoint: config.sqliteBackgroundCheckpoint,
        onHookError: (error) => app.log.error({ err: error }, 'an after-commit hook or background database work failed'),
        onStatement: tracing ? tracing.onStatement : undefined,
      });
    await app.register(databasePlugin, { store, migrate: options.migrate ?? true });
    app.decorate('postChanges', store.postChanges);
  } catch (error) {
    const variable = config.databaseDirectUrl && config.databaseDirectUrl !== config.databaseUrl ? 'DATABASE_URL or DATABASE_DIRECT_URL' : 'DATABASE_URL';
    throw new Error(`${variable}: the database cannot be used: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  await app.register(securityPlugin);
  await app.register(metricsPlugin, { completions: accessLog });
  // The rate limit's hook runs after the request id and CORS (a 429 carries them) and before every check of the
  // request that follows (conditional headers), so that each answer of a limited route carries its fields.
  await app.register(rateLimitPlugin);
  await app.register(conditionalPlugin);
  // Before every route, /docs included: it hooks each route as the route is declared (an Authorization header that
  // is no bearer credential is a 401 on every route). On every signed-in request: plain SQL (tokens.repository.ts).
  await app.register(authPlugin, { findCaller: (hash) => findCallerByTokenHash(store, hash, new Date().toISOString()) });
  await app.register(openapiPlugin);
  await app.register(fanoutPlugin);
  await app.register(streamsPlugin);
  // Before the modules: it hooks each creating route as the route is declared.
  await app.register(idempotencyPlugin);
  await app.register(modules);
  // SQLite: the post search index merged in the background.
  await app.register(searchMergePlugin);
  return app;
}
