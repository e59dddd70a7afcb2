import type { CompiledQuery, Kysely } from 'kysely';
import type { Database } from './types.js';

/**
 * A query compiled once and run with new values. Kysely builds and compiles a query on every call, which costs
 * more than SQLite takes for a point read; here the compiled SQL is kept and only its parameters change: `values`
 * take the places of the `standIns` they line up with. Only for queries whose shape never depends on the values.
 */
export function reusable<R>(compiled: CompiledQuery<R>, standIns: unknown[]): (values: unknown[]) => CompiledQuery<R> {
  const slots = standIns.map((standIn) => {
    const indexes = compiled.parameters.flatMap((p, i) => (p === standIn ? [i] : []));
    if (indexes.length === 0) throw new Error(`stand-in ${String(standIn)} is not a parameter of: ${compiled.sql}`);
    return indexes;
  });
  return (values) => {
    const parameters = compiled.parameters.slice();
    slots.forEach((indexes, k) => {
      for (const i of indexes) parameters[i] = values[k];
    });
    // Spelled out rather than `{ ...compiled, parameters }`: every result then has one shape, which V8 builds
    // inline; the spread took its generic clone path on every call (callgrind: ~1,000 instructions a request).
    return { query: compiled.query, queryId: compiled.queryId, sql: compiled.sql, parameters };
  };
}

/** Statements compiled once per database (their SQL depends only on its dialect), made on first use. */
export function perDatabase<V>(make: (db: Kysely<Database>) => V): (db: Kysely<Database>) => V {
  const made = new WeakMap<Kysely<Database>, V>();
  return (db) => {
    let value = made.get(db);
    if (value === undefined) made.set(db, (value = make(db)));
    return value;
  };
}
