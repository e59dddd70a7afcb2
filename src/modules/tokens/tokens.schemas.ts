import { Type } from 'typebox';
import { Id, IdParam, Text, Timestamp } from '../../shared/schemas.js';

export const CreateTokenBodySchema = Type.Object(
  {
    username: Text(1, 64),
    password: Text(1, 256),
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
