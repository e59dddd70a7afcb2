import { isUtf8 } from 'node:buffer';
import fp from 'fastify-plugin';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../shared/errors.js';

/**
 * One `; name=value` parameter of a media type (RFC 9110 §5.6.6): the value a token or a quoted string with
 * escapes. The parameter itself may be empty (`application/json;`).
 */
const PARAMETER = /;[ \t]*(?:([!#$%&'*+.^_`|~0-9A-Za-z-]+)=("(?:[^"\\]|\\.)*"|[!#$%&'*+.^_`|~0-9A-Za-z-]*))?[ \t]*/gy;
const UTF8 = /^utf-?8$/i;

/**
 * The charset a Content-Type declares: `undefined` when it declares none, `null` when its parameters cannot be read
 * (then no charset can be trusted to be UTF-8). Only a parameter named `charset` counts, not that text inside
 * another parameter's quoted value.
 */
export function declaredCharset(contentType: string): string | undefined | null {
  const semicolon = contentType.indexOf(';');
  if (semicolon < 0) return undefined;
  const rest = contentType.slice(semicolon).trimEnd();
  let charset: string | undefined;
  PARAMETER.lastIndex = 0;
  while (PARAMETER.lastIndex < rest.length) {
    const match = PARAMETER.exec(rest);
    if (!match) return null;
    const [, name, raw = ''] = match;
    if (name?.toLowerCase() !== 'charset') continue;
    if (charset !== undefined) return null; // declared twice: ambiguous
    charset = raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
  }
  return charset;
}

/**
 * Fastify's parser refuses `__proto__` keys (and `constructor.prototype`) with the same error as malformed JSON. Text
 * that plain `JSON.parse` reads is valid JSON with a field no operation defines: answered as any unknown field is
 * (CONTRACT §1), named by its path. `JSON.parse` is safe for finding it: it makes such a key an own property, never
 * the prototype. Any other parse error is passed on as it is.
 */
function forbiddenKeyProblem(text: string, error: Error): Error {
  if ((error as { code?: string }).code !== 'FST_ERR_CTP_INVALID_JSON_BODY') return error;
  const find = (node: unknown, path: string[]): string[] | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    if (Object.hasOwn(node, '__proto__')) return [...path, '__proto__'];
    for (const [key, child] of Object.entries(node)) {
      if (key === 'constructor' && child !== null && typeof child === 'object' && Object.hasOwn(child, 'prototype')) {
        return [...path, 'constructor'];
      }
      const found = find(child, [...path, key]);
      if (found) return found;
    }
    return undefined;
  };
  let found: string[] | undefined;
  try {
    found = find(JSON.parse(text), []);
  } catch {
    return error;
  }
  if (!found) return error;
  const field = found.join('.');
  return AppError.badRequest(field, 'is not an allowed field');
}

/**
 * A client library that sets a Content-Type on every request (`application/json`, often) sends one on a DELETE
 * without a body too. An operation that takes no body has nothing to parse in an empty one: no body, whatever type
 * it claims, rather than malformed JSON or a 415.
 */
const nothingToParse = (request: FastifyRequest, bytes: Buffer) => bytes.length === 0 && takesNoBody(request);

/** An operation declared without a body schema (a DELETE). */
const takesNoBody = (request: FastifyRequest) => request.routeOptions.schema?.body === undefined;

/**
 * An operation without a body schema (a DELETE) takes no fields: every field of a JSON body sent to it is unknown,
 * which CONTRACT §1 answers with 400 naming it, as on any other operation. An empty object is no field at all.
 */
function fieldsNotTaken(value: unknown): AppError | null {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const fields = Object.keys(value);
    if (fields.length === 0) return null;
    const errors = fields.slice(0, 20).map((field) => ({ field, message: 'is not an allowed field' }));
    return new AppError(400, `${fields[0]} is not an allowed field: this operation takes no body`, errors);
  }
  return AppError.badRequest('body', 'is not taken by this operation');
}

/**
 * Request bodies are JSON in UTF-8 (CONTRACT §1), and bad bytes are refused rather than stored. Fastify's own
 * JSON parser reads the body as a UTF-8 string, whatever charset the request declares, and decodes invalid bytes
 * to U+FFFD: a client sending Latin-1 text ("café" as 0x63 0x61 0x66 0xE9) would have "caf\uFFFD" stored with a 201.
 * Here the body is read as bytes: a declared charset other than UTF-8 is a 415, bytes that are not UTF-8 are a
 * 400, and valid UTF-8 goes on to Fastify's parser (with its protections against prototype poisoning). Text without
 * a charset parameter is UTF-8 by definition of application/json (RFC 8259 §8.1).
 * @see https://www.rfc-editor.org/rfc/rfc8259#section-8.1
 */
export default fp(
  async (app) => {
    // Fastify's own parser, with the poisoning actions configured on the app (app.ts), so they are set in one place.
    const { onProtoPoisoning = 'error', onConstructorPoisoning = 'error' } = app.initialConfig;
    const parseJson = app.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      // Bodies are not decoded: a compressed one read as JSON would be refused as malformed, or worse, taken as it
      // is. RFC 9110 §8.4 answers an unsupported content coding with 415 and Accept-Encoding naming what is taken.
      const coding = request.headers['content-encoding'];
      if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
        done(new AppError(415, 'Request bodies are not decoded: send them without a Content-Encoding', undefined, { 'accept-encoding': 'identity' }), undefined);
        return;
      }
      const charset = declaredCharset(request.headers['content-type'] ?? '');
      if (charset !== undefined && (charset === null || !UTF8.test(charset))) {
        const declared = charset === null ? 'the Content-Type parameters cannot be read' : `the charset "${charset}" is not accepted`;
        done(new AppError(415, `Request bodies must be JSON in UTF-8; ${declared}`), undefined);
        return;
      }
      const bytes = body as Buffer;
      if (nothingToParse(request, bytes)) {
        done(null, undefined);
        return;
      }
      if (!isUtf8(bytes)) {
        done(new AppError(400, 'The request body is not valid UTF-8', [{ field: 'body', message: 'is not valid UTF-8' }]), undefined);
        return;
      }
      // Typed as possibly async; Fastify's default JSON parser answers through `done`, synchronously.
      const text = bytes.toString('utf8');
      void parseJson(request, text, (error, value) => {
        if (error) done(forbiddenKeyProblem(text, error), undefined);
        else done(takesNoBody(request) ? fieldsNotTaken(value) : null, value);
      });
    });
    // Any other media type: a 415, unless there is nothing to parse.
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
      if (nothingToParse(request, body as Buffer)) {
        done(null, undefined);
        return;
      }
      done(new AppError(415, 'Request bodies must be JSON, sent with Content-Type: application/json'), undefined);
    });
  },
  { name: 'json-body' },
);
