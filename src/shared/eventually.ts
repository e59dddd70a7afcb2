/**
 * A value that is there now or comes later. better-sqlite3 answers synchronously, so on SQLite the hottest read
 * (GET /posts/{id}) can run start to finish without a promise; on PostgreSQL, and inside a transaction, the same
 * code gets a promise. Callers that just `await` such a value need not care which it is.
 *
 * Why bother: every `async` layer costs a promise, a microtask and, when it resolves to an object, a lookup of
 * `then` on that object. Counted with callgrind on GET /posts/{id}, the three layers between the handler and
 * better-sqlite3 cost ~4,000 instructions a request, about 3% of the request.
 */
export type Eventually<T> = T | Promise<T>;

/** `next(value)` as soon as `value` is there: at once for a plain value, once it settles for a promise. */
export function whenReady<T, U>(value: Eventually<T>, next: (value: T) => Eventually<U>): Eventually<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}
