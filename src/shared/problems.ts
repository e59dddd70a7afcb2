import { ProblemSchema } from './schemas.js';

/** Route-specific error responses in problem+json, for route schemas (and so for the OpenAPI document). */
const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: ProblemSchema } } });

export const problems = {
  400: (what: string) => problem(what),
  401: problem('No valid bearer token (see WWW-Authenticate)'),
  403: problem('The caller may not do this'),
  404: (what: string) => problem(`No such ${what}`),
  409: (what: string) => problem(what),
};
