import zlib from 'node:zlib';
import fp from 'fastify-plugin';
import compress from '@fastify/compress';
import type { onSendHookHandler } from 'fastify';

/**
 * What gets compressed: JSON (application/json, application/problem+json, …), the text formats (/metrics, the
 * Swagger UI's HTML, CSS and JavaScript) and SVG. Server-sent events never: an event stream must reach the client
 * event by event, and a compressor buffers its input until it has a block worth emitting.
 */
const EVENT_STREAM = /^\s*text\/event-stream\s*(?:;|$)/i;
const COMPRESSIBLE = /^\s*(?:text\/|application\/(?:[\w.+-]+\+)?json\s*(?:;|$)|application\/javascript|image\/svg\+xml)/i;

export const isCompressible = (contentType: string): boolean => !EVENT_STREAM.test(contentType) && COMPRESSIBLE.test(contentType);

/** After Fastify's HEAD handler: a 304 sends no Content-Length (it may only repeat the 200's, RFC 9110 §8.6). */
const noLengthOn304: onSendHookHandler = (_request, reply, payload, done) => {
  if (reply.statusCode === 304) reply.removeHeader('content-length');
  done(null, payload);
};

/**
 * Answers of 1 KiB or more are compressed when the client accepts br or gzip (CONTRACT §5), with
 * `Vary: Accept-Encoding`. Registered before any route: the plugin adds its onSend hook to each route as it is
 * declared. Request bodies are not decompressed: the API takes plain JSON only, and inflating untrusted input
 * would let a small body expand past the body limit's intent.
 */
export default fp(
  async (app) => {
    await app.register(compress, {
      global: true,
      globalDecompression: false,
      threshold: 1024,
      // br and gzip only, in that order: zstd would be picked first on Node >= 22.15 and not on Node 20, and the
      // same client should get the same answer whatever Node runs the service. Deflate is left out (its wire
      // format was historically ambiguous: zlib-wrapped or raw).
      encodings: ['br', 'gzip'],
      customTypes: isCompressible,
      brotliOptions: {
        params: {
          // Quality 4, not zlib's default of 11: 11 is meant for compressing static assets once, ahead of time,
          // and costs far more CPU per answer for little gain in size. At 4 brotli costs about what gzip's default
          // level does and its output is about the same size (smaller on the document).
          [zlib.constants.BROTLI_PARAM_QUALITY]: 4,
          [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
        },
      },
    });

    // A HEAD answers with the headers of the GET (RFC 9110 §9.3.2), Content-Encoding and Content-Length included.
    // Fastify's HEAD route ends its onSend hooks with one that measures the body and drops it, and the plugin
    // appends its compressor after it, where there is no body left: the compressor goes before it instead.
    // After it, a 304 loses the Content-Length it measured (of nothing): a 304 may only repeat the 200's (§8.6).
    app.addHook('onRoute', (route) => {
      if (route.method !== 'HEAD' || !Array.isArray(route.onSend)) return;
      const last = route.onSend.findIndex((hook) => hook.name === 'headRouteOnSendHandler');
      if (last >= 0) route.onSend = [...route.onSend.filter((_, i) => i !== last), route.onSend[last]!, noLengthOn304];
    });

    // `Vary: Accept-Encoding` on every answer that could be compressed, not only on those that were: a 304 and an
    // answer under 1 KiB name the same variance as the compressed GET, so a shared cache never serves a br body to
    // a client that did not ask for it. Lowercase: the plugin looks for exactly `accept-encoding` before appending
    // its own.
    app.addHook('onSend', (_request, reply, payload, done) => {
      const type = reply.getHeader('content-type');
      if (typeof type === 'string' && isCompressible(type)) {
        const vary = reply.getHeader('vary');
        if (vary === undefined) reply.header('vary', 'accept-encoding');
        else if (typeof vary === 'string' && !/accept-encoding/i.test(vary)) reply.header('vary', `${vary}, accept-encoding`);
      }
      done(null, payload);
    });
  },
  { name: 'compression' },
);
