import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import authPlugin, { bearer, optionalBearer, type Caller } from './auth.js';

/** A bare Fastify with only the auth plugin, whose token lookup counts its calls and knows one token's hash. */
async function appWith(known: { hash: string; caller: Caller } | undefined) {
  const lookups: string[] = [];
  const app = Fastify();
  await app.register(authPlugin, {
    findCaller: async (hash) => {
      lookups.push(hash);
      return known && hash === known.hash ? known.caller : undefined;
    },
  });
  return { app, lookups };
}

describe('a route that finds its caller in its own read (callerInHandler)', () => {
  it('gets no token lookup before its handler, only the check of the header form; adopt answers a dead token 401', async () => {
    const { app, lookups } = await appWith(undefined);
    const caller: Caller = { id: 7, role: 'member', tokenId: 3, hasBlocks: false, hasMutes: false };
    app.get('/own', { schema: { security: optionalBearer }, config: { callerInHandler: true } }, async (request) => {
      const hash = app.auth.hashOf(request);
      if (hash === undefined) return { anonymous: true };
      // The handler's own statement: here, the caller of `cb_known` (its SHA-256) and no other.
      const found = app.auth.adopt(request, hash === 'qRzxd1dNQ8nI-6Hj5WVhkSMNFD2vl8zzGkx-KZvBxZI' ? caller : undefined);
      // Anything that asks later in the request gets the adopted caller, without a lookup.
      return { id: found.id, again: (await app.auth.optional(request))?.id };
    });
    await app.ready();

    expect((await app.inject({ method: 'GET', url: '/own' })).json()).toEqual({ anonymous: true });
    const known = await app.inject({ method: 'GET', url: '/own', headers: { authorization: 'Bearer cb_known' } });
    expect(known.statusCode).toBe(200);
    expect(known.json()).toEqual({ id: 7, again: 7 });
    const dead = await app.inject({ method: 'GET', url: '/own', headers: { authorization: 'Bearer cb_dead' } });
    expect(dead.statusCode).toBe(401);
    const otherScheme = await app.inject({ method: 'GET', url: '/own', headers: { authorization: 'Basic abc' } });
    expect(otherScheme.statusCode).toBe(401);
    // The plugin itself never looked a token up: the route did, in its handler.
    expect(lookups).toEqual([]);
    await app.close();
  });

  it('is refused on a route that requires a token, or takes none', async () => {
    for (const security of [bearer, []]) {
      const { app } = await appWith(undefined);
      const declare = () => app.get('/own', { schema: { security }, config: { callerInHandler: true } }, async () => ({}));
      expect(declare).toThrow(/callerInHandler is for routes where the token is optional/);
      await app.close();
    }
  });
});
