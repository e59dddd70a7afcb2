import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { sendError } from './reply.js';

/** Known route patterns and their methods, to tell 405 (known path, other method) from 404 (unknown path). */
interface RoutePattern {
  regex: RegExp;
  methods: Set<string>;
}

/** The request's path, without its query. */
const pathOf = (request: FastifyRequest) => request.url.split('?')[0] ?? '/';

/**
 * The answer to a request no route takes: 405 with Allow on a known path, else 404. `record` is called for every
 * route (an onRoute hook); `allowedMethods` and `refuse` are decorated on the app and set as the 404 handler.
 */
export function routeRefusal() {
  const patterns = new Map<string, RoutePattern>();
  /** Routes without parameters, by path: on such a path only they answer, as the router prefers them. */
  const exact = new Map<string, Set<string>>();

  const record = (route: RouteOptions) => {
    const source = route.url
      .split('/')
      .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg === '*' ? '.*' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    const entry = patterns.get(route.url) ?? { regex: new RegExp(`^${source}$`), methods: new Set<string>() };
    for (const m of [route.method].flat()) entry.methods.add(m);
    patterns.set(route.url, entry);
    if (!/[:*]/.test(route.url)) exact.set(route.url, entry.methods);
  };

  const allowedMethods = (path: string) => {
    const own = exact.get(path);
    if (own) return new Set(own);
    const allowed = new Set<string>();
    for (const { regex, methods } of patterns.values()) {
      if (regex.test(path)) for (const m of methods) allowed.add(m);
    }
    return allowed;
  };

  const refuse = (request: FastifyRequest, reply: FastifyReply) => {
    const path = pathOf(request);
    const allowed = allowedMethods(path);
    if (allowed.size > 0) {
      // The seed's interface uses only GET, POST, PUT and DELETE; anything else on a known path is 405.
      reply.header('allow', [...allowed].sort().join(', '));
      return sendError(request, reply, { status: 405, detail: `${request.method} is not allowed on ${path}` });
    }
    return sendError(request, reply, { status: 404, detail: `No resource at ${path}` });
  };

  /**
   * Whether a request that failed its path parameters' validation was routed by a parameter where no resource
   * can be: an empty segment (`/users/` is `/users/:user_id` with an empty id to the router) or the path of a route
   * without parameters that does not take this method (`PUT /boards/list` reaches `PUT /boards/:board_id`). Such a
   * path is unknown (404) or known for other methods (405), not a malformed id (400).
   */
  const misrouted = (request: FastifyRequest) => {
    const path = pathOf(request);
    return exact.has(path) || path.endsWith('/') || path.includes('//');
  };

  return { record, allowedMethods, refuse, misrouted };
}

export type RouteRefusal = ReturnType<typeof routeRefusal>;
