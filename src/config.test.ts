import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('loadConfig PUBLIC_URL', () => {
  it.each([
    ['http://localhost:3000', 'http://localhost:3000'],
    ['https://api.example.org/corkboard/', 'https://api.example.org/corkboard'],
    ['http://[::1]:8080', 'http://[::1]:8080'],
    ['https://example.org/a%20b/~team', 'https://example.org/a%20b/~team'],
  ])('accepts %s as %s (trailing slashes dropped)', (value, expected) => {
    expect(loadConfig({ PUBLIC_URL: value }).publicUrl).toBe(expected);
  });

  // Links are written into JSON without escaping and into Link headers between < and >, so the base URL may hold
  // only characters a URL carries unencoded.
  it.each(['http://exa"mple.org', 'http://example.org/a b', 'http://example.org/<x>', 'http://example.org/\\x', 'http://exämple.org', 'ftp://example.org', 'http://example.org/?q=1', 'http://example.org/#top'])(
    'rejects %s, naming PUBLIC_URL',
    (value) => {
      expect(() => loadConfig({ PUBLIC_URL: value })).toThrow(ConfigError);
      expect(() => loadConfig({ PUBLIC_URL: value })).toThrow(/^PUBLIC_URL: /);
    },
  );
});
