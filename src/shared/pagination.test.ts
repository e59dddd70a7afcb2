import { describe, expect, it } from 'vitest';
import { AppError } from './errors.js';
import { createCursorCodec, withCursor } from './pagination.js';

describe('withCursor', () => {
  it.each([
    ['/posts', '/posts?cursor=NEW'],
    ['/posts?', '/posts?cursor=NEW'],
    ['/posts?limit=3', '/posts?limit=3&cursor=NEW'],
    ['/posts?limit=3&cursor=OLD', '/posts?limit=3&cursor=NEW'],
    ['/posts?cursor=OLD&limit=3', '/posts?limit=3&cursor=NEW'],
    ['/posts?cursor=A&cursor=B&&limit=3', '/posts?limit=3&cursor=NEW'],
    ['/users?username=Ann%20Lee&limit=2', '/users?username=Ann%20Lee&limit=2&cursor=NEW'],
    // The query parser reads these names as `cursor` too, so they are replaced like it.
    ['/posts?cur%73or=OLD&limit=3', '/posts?limit=3&cursor=NEW'],
    ['/posts?cursor&limit=3', '/posts?limit=3&cursor=NEW'],
    // A malformed escape is not a cursor; it is kept as sent.
    ['/posts?%E0%A4%A=1', '/posts?%E0%A4%A=1&cursor=NEW'],
  ])('%s → %s', (target, expected) => {
    expect(withCursor(target, 'NEW')).toBe(expected);
  });

  it('percent-encodes characters that a Link header or a URL cannot carry as they are', () => {
    expect(withCursor('/posts?q="<a b>"&cursor=OLD', 'NEW')).toBe('/posts?q=%22%3Ca+b%3E%22&cursor=NEW');
  });
});

describe('createCursorCodec', () => {
  const codec = createCursorCodec('a secret of the database');

  it('decodes what it encodes, for the same collection only', () => {
    const cursor = codec.encode('posts', 1485);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(codec.decode('posts', cursor)).toBe(1485);
    expect(() => codec.decode('users/7/posts', cursor)).toThrow(AppError);
  });

  it('rejects a cursor signed with another secret, an edited key and garbage with a 400 naming cursor', () => {
    const other = createCursorCodec('another secret').encode('posts', 1485);
    const [, mac] = codec.encode('posts', 1485).split('.');
    const edited = `${Buffer.from('1486').toString('base64url')}.${mac}`;
    for (const bad of [other, edited, 'garbage', '', 'a.b.c']) {
      const error = (() => {
        try {
          codec.decode('posts', bad);
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(AppError);
      expect(error).toMatchObject({ statusCode: 400, errors: [{ field: 'cursor' }] });
    }
  });
});
