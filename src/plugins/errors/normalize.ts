import type { FastifyError } from 'fastify';
import { isDatabaseUnavailable } from '../../db/errors.js';
import { AppError, type FieldError } from '../../shared/errors.js';
import { PATTERN_MESSAGES } from '../../shared/schemas.js';

/** An error as Ajv (and the validators of plugins/validation.ts) report it. */
export interface AjvError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

/** What any error comes down to on the wire: a status, a sentence, the fields at fault, extra headers. */
export interface Normalized {
  status: number;
  detail: string;
  errors?: FieldError[];
  headers?: Record<string, string>;
  /** The problem type URI (RFC 9457 `type`); `about:blank` when absent. */
  type?: string;
}

/**
 * At most this many field problems in one answer (CONTRACT §5): a body of thousands of unknown keys must not be
 * answered (and logged) with thousands of errors. A client fixes the first ones and tries again.
 */
export const MAX_FIELD_ERRORS = 20;
/** A field name is the client's own text (an unknown key): it is cut to this length in answers and logs. */
const MAX_FIELD_NAME = 100;

const shorten = (text: string) => (text.length > MAX_FIELD_NAME ? `${text.slice(0, MAX_FIELD_NAME)}…` : text);

/** Turns one Ajv error into a field name and a message a client can act on. */
function fieldError(error: AjvError, part: string | undefined): FieldError {
  const path = error.instancePath.split('/').filter(Boolean).join('.');
  const join = (name: unknown) => (path ? `${path}.${String(name)}` : String(name));
  switch (error.keyword) {
    case 'required':
      return { field: join(error.params.missingProperty), message: 'is required' };
    case 'additionalProperties':
      return { field: join(error.params.additionalProperty), message: 'is not an allowed field' };
    case 'type':
      if (!path && part === 'body') return { field: 'body', message: 'must be a JSON object' };
      return { field: path || part || 'request', message: `must be ${String(error.params.type)}` };
    case 'minLength':
      return { field: path, message: error.params.limit === 1 ? 'must not be empty' : `must be at least ${String(error.params.limit)} characters` };
    case 'maxLength':
      return { field: path, message: `must be at most ${String(error.params.limit)} character${error.params.limit === 1 ? '' : 's'}` };
    case 'pattern':
      return { field: path, message: PATTERN_MESSAGES[String(error.params.pattern)] ?? 'has an invalid format' };
    case 'format':
      return {
        field: path,
        message: error.params.format === 'int64' ? PATTERN_MESSAGES['^(0|[1-9][0-9]{0,18})$']! : `must be a valid ${String(error.params.format)}`,
      };
    case 'enum':
      return { field: path, message: `must be one of: ${(error.params.allowedValues as unknown[]).join(', ')}` };
    default:
      return { field: path || part || 'request', message: error.message ?? 'is invalid' };
  }
}

/**
 * One problem per field (the first Ajv reports: an empty title is "must not be empty", not that and "must not be
 * blank" too), at most MAX_FIELD_ERRORS of them, with field names cut to a sane length.
 */
export function fieldErrors(validation: readonly AjvError[], part: string | undefined): { errors: FieldError[]; more: boolean } {
  const seen = new Set<string>();
  const errors: FieldError[] = [];
  for (const error of validation) {
    const e = fieldError(error, part);
    e.field = shorten(e.field);
    if (seen.has(e.field)) continue;
    if (errors.length === MAX_FIELD_ERRORS) return { errors, more: true };
    seen.add(e.field);
    errors.push(e);
  }
  return { errors, more: false };
}

/** Maps any error (ours, Fastify's, a plugin's, or an unexpected one) to a status, message and field list. */
export function normalize(error: FastifyError | AppError | Error): Normalized {
  if (error instanceof AppError) {
    return { status: error.statusCode, detail: error.message, errors: error.errors, headers: error.headers, type: error.type };
  }
  const fe = error as FastifyError & { validation?: AjvError[]; validationContext?: string };
  if (fe.validation) {
    // A 404-worthy id never reaches here: a malformed id is a malformed request (400), as the seed says.
    const { errors, more } = fieldErrors(fe.validation, fe.validationContext);
    const detail = errors.map((e) => `${e.field} ${e.message}`).join('; ') + (more ? `; and more (at most ${MAX_FIELD_ERRORS} are listed)` : '');
    return { status: 400, detail, errors };
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, detail: 'Request bodies must be JSON, sent with Content-Type: application/json' };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, detail: 'The request body is larger than the service accepts' };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, detail: 'The request body is empty', errors: [{ field: 'body', message: 'is required' }] };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { status: 400, detail: 'The request body is not valid JSON', errors: [{ field: 'body', message: 'is not valid JSON' }] };
  }
  // The database cannot serve now (a lock not granted in time, the server gone, a full disk): retry later. The
  // driver's error stays the logged cause.
  if (isDatabaseUnavailable(error)) {
    return { status: 503, detail: 'The database is unavailable; retry later', headers: { 'retry-after': '1' } };
  }
  const status = fe.statusCode ?? 500;
  if (status === 400 && error instanceof SyntaxError) {
    return { status, detail: 'The request body is not valid JSON', errors: [{ field: 'body', message: 'is not valid JSON' }] };
  }
  if (status >= 400 && status < 500) return { status, detail: fe.message };
  return { status: status >= 500 && status < 600 ? status : 500, detail: 'An unexpected error occurred' };
}
