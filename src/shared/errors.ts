/** A field-level problem, reported in `errors` of a problem document or a board envelope. */
export interface FieldError {
  field: string;
  message: string;
}

/**
 * The one error type handlers throw. The error handler turns it into problem+json, or into the board envelope
 * under /boards, so a handler never decides the wire shape of its errors.
 */
export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly errors?: FieldError[],
    readonly headers?: Record<string, string>,
    /** A problem type URI (PROBLEM_TYPES in problems.ts) when a client must tell this refusal from others. */
    readonly type?: string,
  ) {
    super(message);
    this.name = 'AppError';
  }

  static badRequest(field: string, message: string): AppError {
    return new AppError(400, `${field} ${message}`, [{ field, message }]);
  }

  static unauthorized(message = 'A valid bearer token is required'): AppError {
    return new AppError(401, message, undefined, { 'www-authenticate': 'Bearer realm="corkboard"' });
  }

  static invalidToken(): AppError {
    return new AppError(401, 'The bearer token is invalid, expired or revoked', undefined, {
      'www-authenticate': 'Bearer realm="corkboard", error="invalid_token"',
    });
  }

  static forbidden(message = 'You may not do this', type?: string): AppError {
    return new AppError(403, message, undefined, undefined, type);
  }

  static notFound(what: string): AppError {
    return new AppError(404, `${what} not found`);
  }

  static conflict(field: string, message: string): AppError {
    return new AppError(409, `${field} ${message}`, [{ field, message }]);
  }
}
