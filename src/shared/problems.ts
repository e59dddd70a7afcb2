import { ProblemSchema } from './schemas.js';

/** Route-specific error responses in problem+json, for route schemas (and so for the OpenAPI document). */
const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: ProblemSchema } } });

/**
 * Problem types (RFC 9457 `type`) for refusals a client must tell apart from a plain 403. Tag URIs (RFC 4151):
 * stable identifiers that promise no page to fetch. Every other problem is `about:blank`.
 */
export const PROBLEM_TYPES = {
  /** A block stands between the two users (CONTRACT §9). */
  blocked: 'tag:corkboard,2026:problems/blocked',
  /** The account is suspended (CONTRACT §9). */
  suspended: 'tag:corkboard,2026:problems/suspended',
} as const;

export const problems = {
  400: (what: string) => problem(what),
  401: problem('No valid bearer token (see WWW-Authenticate)'),
  403: problem('The caller may not do this'),
  /** A 403 whose description says more (a problem type a client can act on). */
  forbidden: (what: string) => problem(what),
  404: (what: string) => problem(`No such ${what}`),
  409: (what: string) => problem(what),
};
