import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { isInt64String } from '../shared/schemas.js';

/**
 * Two Ajv instances instead of Fastify's one:
 * - bodies are JSON and must already have the right types ("5" is not a number), unknown fields are an error
 *   rather than silently dropped (Fastify's default removeAdditional), and every problem is reported at once;
 * - path and query strings are text by nature, so they are coerced ("20" → 20) and get defaults.
 * Both know the `int64` string format used by path ids.
 */
function createAjv(options: Options): Ajv {
  const ajv = new Ajv({ removeAdditional: false, useDefaults: true, allErrors: true, strict: 'log', ...options });
  // ajv-formats is CommonJS: under NodeNext its function is reached as `.default` (it also sets that at runtime).
  addFormats.default(ajv);
  ajv.addFormat('int64', { type: 'string', validate: isInt64String });
  return ajv;
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const bodies = createAjv({ coerceTypes: false });
  const strings = createAjv({ coerceTypes: true });
  return ({ schema, httpPart }) => (httpPart === 'body' ? bodies : strings).compile(schema as object);
}
