import { Type, type Static } from 'typebox';
import { Id, IdParam, LinksSchema, Text, Timestamp } from '../../shared/schemas.js';

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

/** A signed-in token as its owner and admins see it (GET /tokens/{id}): never the secret nor its hash. */
export const SessionSchema = Type.Object(
  {
    id: Id,
    userId: Id,
    createdAt: Timestamp,
    expiresAt: Timestamp,
    links: Type.Array(LinksSchema.items, { description: 'self, user' }),
  },
  { title: 'Session' },
);
export type Session = Static<typeof SessionSchema>;
