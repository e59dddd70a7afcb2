/**
 * A typed client for corkboard: openapi-fetch over the types openapi-typescript generates from openapi.json
 * (client/schema.d.ts, `npm run client`). Paths, parameters, bodies and answers are checked by the compiler:
 *
 *   const api = createCorkboardClient('http://localhost:3000', token);
 *   const { data, error, response } = await api.GET('/users/{user_id}', { params: { path: { user_id: 1 } } });
 *
 * `data` is the 2xx body, `error` the problem details (the envelope under /boards) of any other status.
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './schema.js';

export type { components, operations, paths };
export type Schemas = components['schemas'];
export type User = Schemas['User'];
export type Post = Schemas['Post'];
export type Reply = Schemas['Reply'];
export type Board = Schemas['Board'];
export type Link = Schemas['Link'];
export type Token = Schemas['Token'];
export type Session = Schemas['Session'];
export type Problem = Schemas['Problem'];
export type EnvelopeError = Schemas['EnvelopeError'];
/**
 * JSON answers only: `GET /posts` and `GET /users/{user_id}/feed` also describe a `text/event-stream` answer (a
 * live stream, read with fetch, see docs/API.md, "Live streams"), which would otherwise widen their `data` to `string | Post[]`.
 */
type JsonMedia = `${string}/${string}json`;
export type CorkboardClient = Client<paths, JsonMedia>;

/**
 * A client for the service at `baseUrl`; with `token`, every request carries it as a bearer token. Sign in with
 * a client without one (`POST /tokens`), then make another with the token. `options` go to openapi-fetch (a
 * custom `fetch`, for instance); headers of one request go in its own `headers`.
 */
export function createCorkboardClient(baseUrl: string, token?: string, options: Omit<ClientOptions, 'baseUrl' | 'headers'> = {}): CorkboardClient {
  return createClient<paths, JsonMedia>({ ...options, baseUrl, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
}
