import { Type } from 'typebox';
import { Id, IdParam, StorableString, Timestamp } from '../../shared/schemas.js';

export const CreateTokenBodySchema = Type.Object(
  {
    username: StorableString(1, 64),
    password: StorableString(1, 256),
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
