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
    expect(cursor).toMatch(/^1485\.[A-Za-z0-9_-]{16}$/);
    expect(codec.decode('posts', cursor)).toBe(1485);
    expect(() => codec.decode('users/7/posts', cursor)).toThrow(AppError);
  });

  it("accepts another process's cursors when it shares the secret, and cursors written the earlier way", () => {
    const cursor = createCursorCodec('a secret of the database').encode('posts', 1485);
    expect(codec.decode('posts', cursor)).toBe(1485);
    const [, mac] = cursor.split('.');
    expect(codec.decode('posts', `${Buffer.from('1485').toString('base64url')}.${mac}`)).toBe(1485);
  });

  it('checks the MAC of a cursor it issued itself: an edited one is a 400 however often the valid one was seen', () => {
    const cursor = codec.encode('posts', 77);
    for (let i = 0; i < 3; i++) expect(codec.decode('posts', cursor)).toBe(77);
    const last = cursor.at(-1) === 'A' ? 'B' : 'A';
    expect(() => codec.decode('posts', `${cursor.slice(0, -1)}${last}`)).toThrow(AppError);
    expect(() => codec.decode('posts', `78.${cursor.split('.')[1]}`)).toThrow(AppError);
    expect(() => codec.decode('posts', `077.${cursor.split('.')[1]}`)).toThrow(AppError);
  });

  it('rejects a cursor signed with another secret, an edited key and garbage with a 400 naming cursor', () => {
    const other = createCursorCodec('another secret').encode('posts', 1485);
    const [, mac] = codec.encode('posts', 1485).split('.');
    const edited = [`1486.${mac}`, `${Buffer.from('1486').toString('base64url')}.${mac}`, `1485.${mac}x`, `1485.${mac?.slice(1)}`];
    for (const bad of [other, ...edited, 'garbage', '', 'a.b.c', `.${mac}`, `-1.${mac}`, `1e3.${mac}`]) {
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
