import { describe, expect, it } from 'vitest';
import { Type } from 'typebox';
import { LinkSchema, VERBATIM } from '../shared/schemas.js';
import { createSerializerCompiler } from './serialization.js';

const compile = (schema: unknown) =>
  createSerializerCompiler()({ schema: schema as never, method: 'GET', url: '/', httpStatus: '200' }) as (data: unknown) => string;

describe('createSerializerCompiler', () => {
  it('writes strings marked x-verbatim as they are, and escapes every other string', () => {
    const serialize = compile(Type.Object({ raw: Type.String({ [VERBATIM]: true }), text: Type.String() }));
    // A marked string is trusted to need no escaping: a quote in it would reach the output unescaped.
    expect(serialize({ raw: 'a"b', text: 'a"b' })).toBe('{"raw":"a"b","text":"a\\"b"}');
  });

  it('serializes links to the JSON that JSON.stringify gives, and leaves the route schema unchanged', () => {
    const schema = Type.Array(LinkSchema);
    const before = JSON.stringify(schema);
    const links = [{ rel: 'self', href: 'http://localhost:3000/posts/7', method: 'GET' }];
    expect(compile(schema)(links)).toBe(JSON.stringify(links));
    expect(JSON.stringify(schema)).toBe(before);
    expect(JSON.stringify(schema)).toContain('"format":"uri"');
  });
});
