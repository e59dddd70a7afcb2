import fastJson from 'fast-json-stringify';
import type { FastifySerializerCompiler } from 'fastify';
import { VERBATIM } from '../shared/schemas.js';

/**
 * Fastify's own serializer (fast-json-stringify over the route's response schema), except that strings marked
 * {@link VERBATIM} are written with fast-json-stringify's `unsafe` format. The marker, not the format, is what the
 * route schemas carry, so the OpenAPI document still shows `href` as a `uri`.
 */
export function createSerializerCompiler(): FastifySerializerCompiler<unknown> {
  return ({ schema }) => fastJson(withVerbatimStrings(schema) as Parameters<typeof fastJson>[0]);
}

function withVerbatimStrings(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withVerbatimStrings);
  if (schema === null || typeof schema !== 'object') return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) copy[key] = withVerbatimStrings(value);
  if (copy[VERBATIM] === true && copy.type === 'string') copy.format = 'unsafe';
  return copy;
}
