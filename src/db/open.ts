import { createPgStore } from './pg-store.js';
import { createSqliteStore } from './sqlite-store.js';
import type { Store, StoreOptions } from './store.js';

/** Opens the store a DATABASE_URL names: `postgres://…` (or `postgresql://…`), else `sqlite:<file>`. */
export function openStore(url: string, options: StoreOptions = {}): Store {
  if (/^postgres(ql)?:\/\//.test(url)) return createPgStore(url, options);
  return createSqliteStore(url.replace(/^sqlite:/, ''), options);
}
