import Fastify, { type RouteOptions } from 'fastify';
import { describe, expect, it } from 'vitest';
import { problems } from '../shared/problems.js';
import routeDocsPlugin, { responses } from './route-docs.js';

/** A bare Fastify with only the route-docs plugin and one route; resolves to the route's documented statuses. */
async function declare(route: Omit<RouteOptions, 'handler'>): Promise<string[]> {
  const app = Fastify();
  await app.register(routeDocsPlugin);
  let statuses: string[] = [];
  app.addHook('onRoute', (declared) => {
    if (declared.method === route.method) statuses = Object.keys(declared.schema?.response ?? {});
  });
  app.route({ ...route, handler: async () => ({}) } as RouteOptions);
  await app.ready();
  await app.close();
  return statuses;
}

const bearer = [{ bearerAuth: [] }];

describe('responses() and the check of each route as it is declared', () => {
  it('lists the standard statuses of the kind beside the route’s own', async () => {
    const create = await declare({
      method: 'POST',
      url: '/things',
      config: { idempotent: true },
      schema: { security: bearer, response: responses({ method: 'POST', bearer: true, idempotent: true }, { 201: { type: 'object' }, 404: problems[404]('thing') }) },
    });
    expect(create).toEqual(['201', '400', '401', '404', '408', '409', '413', '415', '422', '429', '500', '503']);
    // No database, no rate limit: neither 503 nor 429; a GET's 304.
    const read = await declare({
      method: 'GET',
      url: '/plain',
      config: { database: false, rateLimit: false },
      schema: { response: responses({ method: 'GET', database: false, rateLimit: false }, { 200: { type: 'object' } }) },
    });
    expect(read).toEqual(['200', '304', '400', '401', '500']);
  });

  it('stops start-up when a route builds its responses without the helper', async () => {
    await expect(declare({ method: 'GET', url: '/bare', schema: { response: { 200: { type: 'object' } } } })).rejects.toThrow(
      'GET /bare: build schema.response with responses()',
    );
  });

  it('stops start-up when the kind given to the helper is not the route’s own', async () => {
    // The route is idempotent and touches the database; the helper was told neither, so 409, 422 and 503 would be missing.
    await expect(
      declare({
        method: 'POST',
        url: '/things',
        config: { idempotent: true, database: false },
        schema: { security: bearer, response: responses({ method: 'POST', bearer: true }, { 201: { type: 'object' } }) },
      }),
    ).rejects.toThrow("POST /things: responses() was given another kind than the route's options say (database, idempotentCreate)");
    // A board route told it is not one would document problem details instead of the envelope.
    await expect(
      declare({ method: 'GET', url: '/boards/x', schema: { response: responses({ method: 'GET' }, { 200: { type: 'object' } }) } }),
    ).rejects.toThrow('(board)');
  });
});
