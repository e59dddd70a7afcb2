import { isUtf8 } from 'node:buffer';
import fp from 'fastify-plugin';
import { AppError } from '../shared/errors.js';

/** The `charset` parameter of a Content-Type, if any (RFC 9110 §8.3.1: quoted or not, case-insensitive). */
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;
const UTF8 = /^utf-?8$/i;

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
    const parseJson = app.getDefaultJsonParser('error', 'error');
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1];
      if (charset !== undefined && !UTF8.test(charset)) {
        done(new AppError(415, `Request bodies must be UTF-8; the charset "${charset}" is not accepted`), undefined);
        return;
      }
      const bytes = body as Buffer;
      if (!isUtf8(bytes)) {
        done(new AppError(400, 'The request body is not valid UTF-8', [{ field: 'body', message: 'is not valid UTF-8' }]), undefined);
        return;
      }
      // Typed as possibly async; Fastify's default JSON parser answers through `done`, synchronously.
      void parseJson(request, bytes.toString('utf8'), done);
    });
  },
  { name: 'json-body' },
);
