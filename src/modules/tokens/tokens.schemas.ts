import { Type } from 'typebox';
import { Id, IdParam, Timestamp } from '../../shared/schemas.js';

export const CreateTokenBodySchema = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 64 }),
    password: Type.String({ minLength: 1, maxLength: 256 }),
  },
  { additionalProperties: false, title: 'Credentials' },
);

export const TokenSchema = Type.Object(
  {
    id: Id,
    token: Type.String({ description: 'Send as `Authorization: Bearer <token>`. Shown only once.' }),
    expiresAt: Timestamp,
    userId: Id,
  },
  { title: 'Token' },
);

export const TokenParamsSchema = Type.Object({ token_id: IdParam('The token id (not the secret)') });
