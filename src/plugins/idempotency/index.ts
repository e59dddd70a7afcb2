import { randomBytes } from 'node:crypto';
import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest, onSendAsyncHookHandler, preHandlerAsyncHookHandler, preValidationAsyncHookHandler } from 'fastify';
import type { Store, Work } from '../../db/store.js';
import { entityTag } from '../../shared/conditional.js';
import { AppError } from '../../shared/errors.js';
import { idempotencyKeys, type KeptAnswer, type KeyRow, type KeyScope } from './idempotency.repository.js';
import { fingerprint, parseIdempotencyKey } from './key.js';

/**
 * Idempotent creates (CONTRACT §6.2, draft-ietf-httpapi-idempotency-key-header).
 *
 * Before the handler of a creating POST that carries an `Idempotency-Key`, the key is looked up in its scope (the
 * caller, the method and the path) and the request is either answered from the kept answer (`Idempotent-Replayed:
 * true`), refused (422: the key came with another body; 409: its first request is still running), or run.
 *
 * The answer is kept in the database, written once the request has one, with no row for the key before then:
 * - a create's 201 is kept inside the create's own transaction (`writeCreated`): a crash leaves both the new
 *   resource and its kept answer, or neither, and nothing that would hold the key after a crash;
 * - any other answer is settled as it is sent (onSend). 4xx answers are kept too, as the draft keeps the first
 *   answer whatever it is: a retry gets the same 403, 404 or 409 instead of a different outcome later. Except 401
 *   and 429, which are about the credentials or the client's rate, not the resource: a retry with a fresh token or
 *   after the wait must run. 5xx answers are not kept: a retry runs again.
 * A request that fails its validation (400) never reaches the key: it is refused the same way every time.
 *
 * "Still running" is known in process: each process remembers the keys its running requests hold (`running`),
 * so a repeat to the same process is a 409 at once. Exactly once holds across processes too, through the unique
 * index: a repeat that reached another process while the first ran finds no answer and runs, but when it comes to
 * keep its own it finds the first's (on PostgreSQL it waits for the first's transaction to end, on SQLite the one
 * writer has ordered them), its create rolls back, and it answers the first's answer, replayed. So does its answer
 * other than a 201 (say, the 409 of a username the first request took meanwhile), when both came with the same
 * body.
 */

const PURGE_BATCH = 1000;
/** Advisory lock id of the purge on PostgreSQL: one process purges at a time. */
const PURGE_LOCK = 0x1de4_0001;
const JSON_TYPE = 'application/json; charset=utf-8';

/** What the hooks know about a request that carries a key. */
interface KeyState {
  key: string;
  fingerprint: string;
  /** Set once the request runs under the key (no answer was kept for it): where and since when. */
  running?: { scope: KeyScope; startedAt: string };
  /** The answer is kept (in the create's transaction), or settled as it was sent. */
  settled: boolean;
  /** The create rolled back: another process kept an answer for the key while it ran. */
  lost?: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A POST that creates (CONTRACT §6.2): an `Idempotency-Key` sent with it is kept with its answer and replayed.
     * On any other POST (sign-in) a key is validated and has no effect.
     */
    idempotent?: boolean;
  }
  interface FastifyRequest {
    /** Set when the request carries a valid Idempotency-Key on a route where it matters. */
    idempotency: KeyState | null;
  }
  interface FastifyInstance {
    idempotency: {
      /** Deletes the expired keys now (the background timer does this periodically); answers how many. */
      purge(): Promise<number>;
    };
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

const malformed = () =>
  AppError.badRequest('Idempotency-Key', 'must be a structured-field string ("…") or a bare value of 1 to 255 visible ASCII characters');
const stillRunning = () =>
  new AppError(
    409,
    'Idempotency-Key: a request with this key is still running; retry after Retry-After',
    [{ field: 'Idempotency-Key', message: 'is in use by a request that is still running' }],
    { 'retry-after': '1' },
  );
const otherBody = () =>
  new AppError(422, 'Idempotency-Key was already used with a different request body', [
    { field: 'Idempotency-Key', message: 'was already used with a different request body' },
  ]);

/** A kept answer that a repeat with this key gets: live, and not a claim of an earlier version (no status). */
const liveAnswer = (row: KeyRow | undefined, now: string): row is KeyRow & { status: number } =>
  row !== undefined && row.status !== null && row.expires_at > now;

/** Writes a kept answer back, as it was first sent, marked as a replay. */
function replay(reply: FastifyReply, row: KeyRow & { status: number }): FastifyReply {
  return reply.code(row.status).headers(replayHeaders(row)).send(row.body ?? '');
}

/** The headers of a replayed answer besides its status. */
function replayHeaders(row: KeyRow): Record<string, string> {
  const headers: Record<string, string> = { 'idempotent-replayed': 'true', 'content-type': row.content_type ?? JSON_TYPE };
  if (row.location !== null) headers.location = row.location;
  if (row.etag !== null) headers.etag = row.etag;
  return headers;
}

const headerText = (reply: FastifyReply, name: string): string | undefined => {
  const value = reply.getHeader(name);
  return value === undefined ? undefined : String(value);
};

/**
 * What a create answers: 201 with `Location` and the new resource's representation as `body`. `etag` is the tag a
 * GET of `location` by the same caller shows, when that GET tags otherwise than by a hash of the body sent.
 */
export interface Created {
  location: string;
  body: unknown;
  etag?: string;
}

/**
 * Runs a create as one unit of work and answers its 201. `work` writes (services take its `tx`) and returns what
 * to answer; it throws to answer otherwise, which rolls the create back. Once it has returned, still inside the
 * transaction, the answer is serialized with the route's own serializer (the bytes kept are the bytes sent) and,
 * with an Idempotency-Key, a before-commit step keeps it, so a crash leaves both the resource and its kept answer
 * or neither; when another process kept an answer for the key meanwhile, the create rolls back with a 409. The
 * answer is sent once the transaction has committed: the handler returns what this answers.
 */
export async function writeCreated(reply: FastifyReply, work: Work<Created>): Promise<FastifyReply> {
  const request = reply.request;
  const state = request.idempotency;
  const { location, etag, body } = await request.server.store.transaction(async (tx) => {
    const created = await work(tx);
    // The status first: the route's serializer is the one of its 201. Location and ETag are set once committed, so
    // that an error answer (the transaction failed after this) does not carry them.
    const body = reply.code(201).serialize(created.body);
    if (typeof body !== 'string') throw new Error('the JSON serializer answered bytes, not text');
    const etag = created.etag ?? entityTag(body);
    if (state?.running) {
      const { scope, startedAt } = state.running;
      const answer: KeptAnswer = { status: 201, contentType: JSON_TYPE, location: created.location, etag, body };
      tx.beforeCommit(async () => {
        const expiresAt = iso(Date.now() + request.server.config.idempotencyTtlSeconds * 1000);
        if (await idempotencyKeys.keep(tx, scope, state.fingerprint, answer, startedAt, expiresAt)) return;
        // Another process kept an answer for the key while this one ran (on PostgreSQL this statement waited for
        // its commit): this create rolls back, and the answer becomes that one's replay (settle).
        state.lost = true;
        throw stillRunning();
      });
    }
    return { location: created.location, etag, body };
  });
  if (state?.running) state.settled = true;
  return reply.code(201).header('location', location).header('etag', etag).type(JSON_TYPE).send(body);
}

/** The secret that keys body fingerprints, shared by every process on the database (like the cursor secret). */
async function fingerprintSecret(store: Store): Promise<Buffer> {
  await store.transaction(({ db }) =>
    db
      .insertInto('settings')
      .values({ key: 'idempotency_secret', value: randomBytes(32).toString('base64url') })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute(),
  );
  const row = await store.db.selectFrom('settings').select('value').where('key', '=', 'idempotency_secret').executeTakeFirstOrThrow();
  return Buffer.from(row.value, 'base64url');
}

/** The path with its parameters as the route parsed them, so `/users/%31/posts` and `/users/1/posts` are one scope. */
function targetOf(request: FastifyRequest): string {
  const params = (request.params ?? {}) as Record<string, unknown>;
  return `${request.method} ${request.routeOptions.url?.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => String(params[name]))}`;
}

/** @see https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/ */
export default fp(
  async (app) => {
    const store = app.store;
    const ttlMs = app.config.idempotencyTtlSeconds * 1000;
    const secret = await fingerprintSecret(store);
    app.decorateRequest('idempotency', null);

    /** Validates the key (also on POST /tokens, where it has no effect) and fingerprints the body as parsed. */
    const readKey =
      (replays: boolean): preValidationAsyncHookHandler =>
      async (request) => {
        const value = request.headers['idempotency-key'];
        if (value === undefined) return;
        const key = typeof value === 'string' ? parseIdempotencyKey(value) : undefined;
        if (key === undefined) throw malformed();
        if (replays) request.idempotency = { key, fingerprint: fingerprint(request.body, secret), settled: false };
      };

    /** The keys that this process's running requests hold, by scope, with their body's fingerprint. */
    const running = new Map<string, { fingerprint: string }>();

    const lookUp: preHandlerAsyncHookHandler = async (request, reply) => {
      const state = request.idempotency;
      if (!state) return;
      // Bearer routes have authenticated already (memoised); a sign-up's token, if any and valid, scopes its key.
      const caller = await app.auth.optional(request).catch(() => undefined);
      const scope: KeyScope = { callerId: caller?.id ?? 0, target: targetOf(request), key: state.key };
      const startedAt = iso(Date.now());
      const row = await idempotencyKeys.find(store, scope);
      if (liveAnswer(row, startedAt)) {
        if (row.fingerprint !== state.fingerprint) throw otherBody();
        return replay(reply, row);
      }
      // No answer yet: run, unless a request of this process runs with the key (checked and taken in one turn of
      // the event loop, after the lookup, so that repeats of a finished request are all replayed). Given back once
      // the answer is out.
      const id = `${scope.callerId} ${scope.target} ${scope.key}`;
      const held = running.get(id);
      if (held !== undefined) throw held.fingerprint === state.fingerprint ? stillRunning() : otherBody();
      const mine = { fingerprint: state.fingerprint };
      running.set(id, mine);
      reply.raw.once('close', () => {
        if (running.get(id) === mine) running.delete(id);
      });
      state.running = { scope, startedAt };
    };

    /**
     * Keeps an answer that was not kept inside the create's transaction: a 4xx, not a 5xx (or 401, 429). When
     * another process kept an answer for the key meanwhile, this request's answer becomes that one, replayed.
     */
    const settle: onSendAsyncHookHandler = async (request, reply, payload) => {
      const state = request.idempotency;
      if (!state?.running || state.settled) return payload;
      state.settled = true;
      const status = reply.statusCode;
      if (status >= 500 || status === 401 || status === 429 || typeof payload !== 'string') return payload;
      if (status < 400) request.log.error({ status }, 'a create answered without keeping its answer in its transaction');
      const { scope, startedAt } = state.running;
      const answer: KeptAnswer = {
        status,
        contentType: headerText(reply, 'content-type') ?? JSON_TYPE,
        location: headerText(reply, 'location'),
        etag: headerText(reply, 'etag'),
        body: payload,
      };
      try {
        // A create that lost its key has nothing of its own to keep: its 409 becomes the replay of the key's answer.
        if (!state.lost) {
          const kept = await store.transaction((tx) => idempotencyKeys.keep(tx, scope, state.fingerprint, answer, startedAt, iso(Date.now() + ttlMs)));
          if (kept) return payload;
        }
        // With another body, this request's own answer stands (it created nothing); a retry of it is a 422.
        const first = await idempotencyKeys.find(store, scope);
        if (!liveAnswer(first, startedAt) || first.fingerprint !== state.fingerprint) return payload;
        reply.code(first.status).removeHeader('retry-after').headers(replayHeaders(first));
        return first.body ?? '';
      } catch (error) {
        // The answer stands, unkept: a retry runs again.
        request.log.warn({ err: error }, 'could not keep the answer of an idempotency key');
        return payload;
      }
    };

    app.addHook('onRoute', (route) => {
      if ([route.method].flat().join() !== 'POST') return;
      const idempotent = route.config?.idempotent === true;
      route.preValidation = [readKey(idempotent), ...[route.preValidation ?? []].flat()];
      if (!idempotent) return;
      route.preHandler = [...[route.preHandler ?? []].flat(), lookUp];
      // First of the route's onSend hooks, so it sees the serialized body before compression does.
      route.onSend = [settle, ...[route.onSend ?? []].flat()];
    });

    // Expired keys go in the background, in batches, never on a request's path.
    let purging: Promise<number> | undefined;
    const purgeOnce = async (): Promise<number> => {
      let total = 0;
      for (;;) {
        const deleted = await store.transaction(async (tx) => {
          if (!(await tx.tryExclusive(PURGE_LOCK))) return 0;
          return idempotencyKeys.purgeExpired(tx.db, new Date().toISOString(), PURGE_BATCH);
        });
        total += deleted;
        if (deleted < PURGE_BATCH) return total;
      }
    };
    const purge = () => (purging ??= purgeOnce().finally(() => (purging = undefined)));
    app.decorate('idempotency', { purge });
    const timer = setInterval(() => {
      purge().catch((error: unknown) => app.log.warn({ err: error }, 'purging expired idempotency keys failed; retried later'));
    }, Math.min(ttlMs, 300_000));
    timer.unref();
    app.addHook('preClose', async () => {
      clearInterval(timer);
      await purging?.catch(() => {});
    });
  },
  { name: 'idempotency', dependencies: ['database', 'auth'] },
);
