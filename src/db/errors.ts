/**
 * Classifies a driver error into the few kinds the application reacts to, the same way on both engines.
 * better-sqlite3 sets `code` to SQLITE_CONSTRAINT_*; pg sets the SQLSTATE class 23 codes.
 */
export type ConstraintKind = 'unique' | 'foreign_key' | 'check';

export function constraintKind(error: unknown): ConstraintKind | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  switch (code) {
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
export const isForeignKeyViolation = (error: unknown) => constraintKind(error) === 'foreign_key';
