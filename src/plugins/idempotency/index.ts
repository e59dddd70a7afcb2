import { randomBytes } from 'node:crypto';
import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest, onSendAsyncHookHandler, preHandlerAsyncHookHandler, preValidationAsyncHookHandler } from 'fastify';
import type { Store, Tx } from '../../db/store.js';
import { AppError } from '../../shared/errors.js';
import { routeTraits } from '../route-docs.js';
import { createIdempotencyRepository, type Claim, type KeptAnswer, type KeyRow, type KeyScope } from './idempotency.repository.js';
import { fingerprint, parseIdempotencyKey } from './key.js';

/**
 * Idempotent creates (CONTRACT §6.2, draft-ietf-httpapi-idempotency-key-header).
 *
 * Before the handler of a creating POST that carries an `Idempotency-Key`, the key is looked up in its scope (the
 * caller, the method and the path) and the request is either answered from the kept answer (`Idempotent-Replayed:
 * true`), refused (422: the key came with another body; 409: its first request is still running), or allowed to
 * run under a claim: a row inserted in a short transaction of its own, so that a concurrent duplicate (in this
 * process or another) sees it; the unique index decides which of two racing requests claims the key.
 *
 * The handler keeps its 201 inside the create's own transaction (`createdAnswer`): a crash leaves both the new
 * resource and its kept answer, or neither. Any other answer is settled as it is sent (onSend):
 * - 4xx answers are kept too, as the draft keeps the first answer whatever it is: a retry gets the same 403, 404
 *   or 409 instead of a different outcome later. Except 401 and 429, which are about the credentials or the
 *   client's rate, not the resource: a retry with a fresh token or after the wait must run.
 * - 5xx answers are not kept: the claim is given up and a retry runs again.
 * A request that fails its validation (400) never reaches the claim: it is refused the same way every time.
 *
 * A claim left by a process that died is taken over once older than CLAIM_STALE_MS. Taking over a claim whose
 * request is in fact still running is safe: its answer is kept only while it still holds the claim, so its create
 * then rolls back (409) and only the newer request creates.
 */

/** Longer than any create takes; until then a retry after a crash is answered 409. */
const CLAIM_STALE_MS = 30_000;
/** Attempts at claiming when the row keeps changing under us (released, taken over) before answering 409. */
const CLAIM_ATTEMPTS = 3;
const PURGE_BATCH = 1000;
/** Advisory lock id of the purge on PostgreSQL: one process purges at a time. */
const PURGE_LOCK = 0x1de4_0001;
const JSON_TYPE = 'application/json; charset=utf-8';

/** What the hooks know about a request that carries a key. */
interface KeyState {
  key: string;
  fingerprint: string;
  /** The row this request claimed, while it runs. */
  claim?: { id: number; token: string };
  /** The claim's fate is decided (kept in the create's transaction, or lost to a takeover): onSend leaves it. */
  settled: boolean;
}

declare module 'fastify' {
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

type Outcome = { kind: 'claimed'; id: number; token: string } | { kind: 'replay'; row: KeyRow } | { kind: 'other-body' } | { kind: 'running' };

/** Looks the key up and claims it if it is free, expired or abandoned. */
async function claimKey(store: Store, scope: KeyScope, print: string, ttlMs: number): Promise<Outcome> {
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    const now = Date.now();
    const claim: Claim = { fingerprint: print, token: randomBytes(12).toString('base64url'), startedAt: iso(now), expiresAt: iso(now + ttlMs) };
    const id = await store.transaction(({ db }) => createIdempotencyRepository(db).insertClaim(scope, claim));
    if (id !== undefined) return { kind: 'claimed', id, token: claim.token };
    const row = await createIdempotencyRepository(store.db).find(scope);
    if (!row) continue; // given up between the insert and the read: claim it afresh
    const expired = row.expires_at <= claim.startedAt;
    if (!expired) {
      if (row.fingerprint !== print) return { kind: 'other-body' };
      if (row.claim_token === null) return { kind: 'replay', row };
      if (row.started_at > iso(now - CLAIM_STALE_MS)) return { kind: 'running' };
    }
    if (await store.transaction(({ db }) => createIdempotencyRepository(db).takeOver(row, claim))) {
      return { kind: 'claimed', id: row.id, token: claim.token };
    }
  }
  return { kind: 'running' };
}

/** Writes a kept answer back, as it was first sent, marked as a replay. */
function replay(reply: FastifyReply, row: KeyRow): FastifyReply {
  reply.code(row.status ?? 500).header('idempotent-replayed', 'true');
  if (row.location !== null) reply.header('location', row.location);
  if (row.etag !== null) reply.header('etag', row.etag);
  return reply.type(row.content_type ?? JSON_TYPE).send(row.body ?? '');
}

const headerText = (reply: FastifyReply, name: string): string | undefined => {
  const value = reply.getHeader(name);
  return value === undefined ? undefined : String(value);
};

/** The answer to a create, built inside its transaction (see `createdAnswer`). */
export interface CreatedAnswer {
  /**
   * Call inside the create's transaction once the resource exists: sets 201 and `Location`, serializes `body`, and
   * with an Idempotency-Key keeps that answer in the same transaction. A claim lost to a takeover is a 409 that
   * rolls the create back.
   */
  keep(tx: Tx, location: string, body: unknown): Promise<void>;
  /** Sends the answer kept by `keep` (after the transaction committed); the handler returns what this returns. */
  send(): FastifyReply;
}

/** The answer of a creating handler; see `CreatedAnswer`. */
export function createdAnswer(request: FastifyRequest, reply: FastifyReply): CreatedAnswer {
  let payload: string | undefined;
  return {
    async keep(tx, location, body) {
      reply.code(201).header('location', location).type(JSON_TYPE);
      // The route's own response serializer: the bytes kept are the bytes sent.
      const serialized = reply.serialize(body);
      if (typeof serialized !== 'string') throw new Error('the JSON serializer answered bytes, not text');
      payload = serialized;
      const state = request.idempotency;
      if (!state?.claim) return;
      const answer: KeptAnswer = { status: 201, contentType: JSON_TYPE, location, etag: headerText(reply, 'etag'), body: serialized };
      const expiresAt = iso(Date.now() + request.server.config.idempotencyTtlSeconds * 1000);
      if (!(await createIdempotencyRepository(tx.db).keep(state.claim.id, state.claim.token, answer, expiresAt))) {
        state.settled = true;
        throw stillRunning();
      }
      tx.afterCommit(() => {
        state.settled = true;
      });
    },
    send() {
      if (payload === undefined) throw new Error('createdAnswer: keep() was not called inside the create transaction');
      return reply.send(payload);
    },
  };
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

    const claim: preHandlerAsyncHookHandler = async (request, reply) => {
      const state = request.idempotency;
      if (!state) return;
      // Bearer routes have authenticated already (memoised); a sign-up's token, if any and valid, scopes its key.
      const caller = await app.auth.optional(request).catch(() => undefined);
      const scope: KeyScope = { callerId: caller?.id ?? 0, target: targetOf(request), key: state.key };
      const outcome = await claimKey(store, scope, state.fingerprint, ttlMs);
      switch (outcome.kind) {
        case 'claimed':
          state.claim = { id: outcome.id, token: outcome.token };
          return;
        case 'replay':
          return replay(reply, outcome.row);
        case 'other-body':
          throw otherBody();
        case 'running':
          throw stillRunning();
      }
    };

    /** Settles a claim whose answer was not kept inside the create's transaction: keeps a 4xx, gives up on a 5xx. */
    const settle: onSendAsyncHookHandler = async (request, reply, payload) => {
      const state = request.idempotency;
      if (!state?.claim || state.settled) return payload;
      state.settled = true;
      const { id, token } = state.claim;
      const status = reply.statusCode;
      try {
        await store.transaction(async ({ db }) => {
          const keys = createIdempotencyRepository(db);
          if (status >= 500 || status === 401 || status === 429 || typeof payload !== 'string') {
            await keys.release(id, token);
            return;
          }
          if (status < 400) request.log.error({ status }, 'a create answered without keeping its answer in its transaction');
          const answer: KeptAnswer = {
            status,
            contentType: headerText(reply, 'content-type') ?? JSON_TYPE,
            location: headerText(reply, 'location'),
            etag: headerText(reply, 'etag'),
            body: payload,
          };
          await keys.keep(id, token, answer, iso(Date.now() + ttlMs));
        });
      } catch (error) {
        // The answer stands; the claim goes stale and a retry takes it over after CLAIM_STALE_MS.
        request.log.warn({ err: error }, 'could not settle an idempotency key');
      }
      return payload;
    };

    app.addHook('onRoute', (route) => {
      if ([route.method].flat().join() !== 'POST') return;
      if (route.url === '/tokens') {
        route.preValidation = [readKey(false), ...[route.preValidation ?? []].flat()];
        return;
      }
      if (!routeTraits('POST', route.url, {}).idempotentCreate) return;
      route.preValidation = [readKey(true), ...[route.preValidation ?? []].flat()];
      route.preHandler = [...[route.preHandler ?? []].flat(), claim];
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
          return createIdempotencyRepository(tx.db).purgeExpired(new Date().toISOString(), PURGE_BATCH);
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
