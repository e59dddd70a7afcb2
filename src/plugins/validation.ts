import { Ajv, type Options, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify';

type FastifyValidationResult = ReturnType<FastifySchemaCompiler<unknown>>;
type DataValidationCxt = Parameters<ValidateFunction>[1];
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

/** How an integer is written in a query string: decimal digits, perhaps a minus sign (range is the schema's). */
const DECIMAL = /^-?[0-9]+$/;

/** An error in Ajv's shape, so that the one error handler names the field as it does for Ajv's own. */
const notDecimal = (field: string): FastifySchemaValidationError => ({
  keyword: 'decimal',
  instancePath: `/${field}`,
  schemaPath: `#/properties/${field}/type`,
  params: {},
  message: 'must be a decimal integer',
});

/**
 * A query-string validator that first requires every integer parameter to be written as a decimal integer. Ajv's
 * coercion alone takes "1e1", "0x10", "1.0", "+5" or " 7" as numbers; a path id that is not canonical is a 400
 * (CONTRACT §1), and so is a query integer spelled another way, on every collection and on the board list alike.
 * Sign and range are left to the schema, whose messages say what is allowed.
 */
function decimalIntegers(
  validate: ValidateFunction,
  schema: { properties?: Record<string, { type?: unknown }> },
): FastifyValidationResult {
  const integers = Object.entries(schema.properties ?? {})
    .filter(([, property]) => property.type === 'integer')
    .map(([name]) => name);
  if (integers.length === 0) return validate;
  const checked = (data: unknown, context?: DataValidationCxt): boolean => {
    const query = data as Record<string, unknown>;
    let spelled: string[] | undefined;
    for (const name of integers) {
      const value = query[name];
      if (typeof value === 'string' && !DECIMAL.test(value)) (spelled ??= []).push(name);
    }
    if (spelled === undefined) {
      const valid = validate(data, context);
      result.errors = validate.errors;
      return valid;
    }
    // The other fields are still checked, so that one answer names every problem (`allErrors`).
    for (const name of spelled) delete query[name];
    validate(data, context);
    result.errors = [...spelled.map(notDecimal), ...(validate.errors ?? [])];
    return false;
  };
  // Fastify reads `errors` after a `false`, and passes the parent object to a validator that has a `schemaEnv`
  // (Ajv needs it to coerce a root value).
  const result: FastifyValidationResult & { schemaEnv: unknown } = Object.assign(checked, {
    errors: null as FastifySchemaValidationError[] | null | undefined,
    schemaEnv: validate.schemaEnv,
  });
  return result;
}

/** Beyond this many unknown keys, an object is refused on them alone (see `unknownKeysFirst`). */
const MAX_UNKNOWN_KEYS = 20;

/**
 * A validator for a closed object (body or query) that first counts the keys the schema does not define. With
 * `allErrors`, Ajv reports every unknown key of a body of thousands of them, one error object each; past
 * MAX_UNKNOWN_KEYS the request is refused on the first of them without running Ajv (the error handler lists at
 * most 20 problems anyway), so a bad body costs a loop over its keys, not an error per key.
 */
function unknownKeysFirst(validate: FastifyValidationResult, schema: { properties?: Record<string, unknown>; additionalProperties?: unknown }): FastifyValidationResult {
  if (schema.additionalProperties !== false) return validate;
  const known = new Set(Object.keys(schema.properties ?? {}));
  const checked = (data: unknown, context?: DataValidationCxt): boolean => {
    if (data !== null && typeof data === 'object' && !Array.isArray(data)) {
      let unknown: string[] | undefined;
      for (const key in data) {
        if (!known.has(key) && (unknown ??= []).push(key) > MAX_UNKNOWN_KEYS) break;
      }
      if (unknown !== undefined && unknown.length > MAX_UNKNOWN_KEYS) {
        result.errors = unknown.map((key) => ({
          keyword: 'additionalProperties',
          instancePath: '',
          schemaPath: '#/additionalProperties',
          params: { additionalProperty: key },
          message: 'must NOT have additional properties',
        }));
        return false;
      }
    }
    const valid = (validate as (data: unknown, context?: DataValidationCxt) => boolean)(data, context);
    result.errors = validate.errors;
    return valid;
  };
  const result: FastifyValidationResult & { schemaEnv: unknown } = Object.assign(checked, {
    errors: null as FastifySchemaValidationError[] | null | undefined,
    schemaEnv: (validate as { schemaEnv?: unknown }).schemaEnv,
  });
  return result;
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const bodies = createAjv({ coerceTypes: false });
  const strings = createAjv({ coerceTypes: true });
  return ({ schema, httpPart }) => {
    if (httpPart === 'body') return unknownKeysFirst(bodies.compile(schema as object), schema as never);
    const validate = strings.compile(schema as object);
    return httpPart === 'querystring' ? unknownKeysFirst(decimalIntegers(validate, schema as never), schema as never) : validate;
  };
}
