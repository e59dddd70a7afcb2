/**
 * Classifies driver errors into the few kinds the application reacts to, the same way on both engines.
 * better-sqlite3 sets `code` to SQLITE_*; pg sets SQLSTATE codes, and Node sets E* codes on socket failures.
 */
export type ConstraintKind = 'unique' | 'foreign_key' | 'check';

const codeOf = (error: unknown): string => String((error as { code?: unknown } | null)?.code ?? '');

export function constraintKind(error: unknown): ConstraintKind | undefined {
  switch (codeOf(error)) {
    case 'SQLITE_CONSTRAINT_UNIQUE':
    case 'SQLITE_CONSTRAINT_PRIMARYKEY':
    case '23505':
      return 'unique';
    case 'SQLITE_CONSTRAINT_FOREIGNKEY':
    case '23503':
      return 'foreign_key';
    case 'SQLITE_CONSTRAINT_CHECK':
    case '23514':
      return 'check';
    default:
      return undefined;
  }
}

export const isUniqueViolation = (error: unknown) => constraintKind(error) === 'unique';

/** The database cannot serve the request now (a lock not granted in time, the server gone): a 503, retry later. */
export class DatabaseUnavailableError extends Error {
  /** The driver's code (SQLITE_BUSY, 57014, …): the log serializer prints `code` but not the cause's fields. */
  readonly code?: string;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DatabaseUnavailableError';
    const code = codeOf(options?.cause);
    if (code) this.code = code;
  }
}

/**
 * True for failures that say "the database is not available now" rather than "this request is wrong": the client
 * should retry later (503 with Retry-After), and the log keeps the driver's own error as the cause.
 * - SQLite: busy or locked past the timeout, a full disk, I/O errors, a file that cannot be opened or is read-only;
 * - PostgreSQL: statement timeout or lock timeout (57014, 55P03), an administrator's shutdown or a crash (57P0x),
 *   connection failures (class 08), too many connections or out of resources (class 53), deadlocks or
 *   serialization failures still failing after the retries (40P01, 40001), and any error of severity FATAL (the
 *   server ending the session: its database dropped or closed to connections, the role refused);
 * - either: a database that is not the one this build was migrated for (a table or column missing: the database
 *   replaced or restored under the running service; GET /health says 503 too), and PostgreSQL refusing a write in
 *   a read-only transaction (25006: a standby after a failover, or the database set read-only);
 * - Node: a socket to the server refused, reset or timed out, and node-postgres's own "Connection terminated".
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (error instanceof DatabaseUnavailableError) return true;
  const code = codeOf(error);
  if (/^SQLITE_(BUSY|LOCKED|FULL|IOERR|CANTOPEN|READONLY|PROTOCOL|NOMEM)/.test(code)) return true;
  if (['57014', '55P03', '40P01', '40001', '25006', '42P01', '42703', '3F000'].includes(code) || /^(57P0|08|53)/.test(code)) return true;
  // A FATAL error ends the session: the server refused or dropped the connection (its database dropped or not
  // accepting connections, the role refused), whatever the SQLSTATE.
  if (/^(FATAL|PANIC)$/.test(String((error as { severity?: unknown } | null)?.severity ?? ''))) return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH'].includes(code)) return true;
  const message = error instanceof Error ? error.message : '';
  if (code === 'SQLITE_ERROR' && /^no such (table|column)\b/.test(message)) return true;
  // Kysely's answer once the store is closed (a request still running during shutdown).
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|driver has already been destroyed/.test(message);
}
