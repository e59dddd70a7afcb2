/**
 * A memo of `make` for string keys, holding at most `size` values: beyond that the oldest entry is dropped (first
 * in, first out). Callers use it where the keys in use are far fewer than `size`, so evictions are rare, and
 * keeping a hit at the young end (LRU) would cost a Map delete and set on every call. `make` must be a pure
 * function of its key.
 */
export function fifoCache<V>(make: (key: string) => V, size = 500): (key: string) => V {
  const cache = new Map<string, V>();
  return (key) => {
    let value = cache.get(key);
    if (value === undefined) {
      value = make(key);
      if (cache.size >= size) cache.delete(cache.keys().next().value as string);
      cache.set(key, value);
    }
    return value;
  };
}
