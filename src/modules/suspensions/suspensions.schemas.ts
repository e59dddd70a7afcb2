import { Type, type Static } from 'typebox';
import { Id, LinksSchema, ReadOnlyEcho, Text, Timestamp } from '../../shared/schemas.js';

export const SuspensionSchema = Type.Object(
  {
    userId: Id,
    reason: Type.String(),
    createdAt: Timestamp,
    links: Type.Array(LinksSchema.items, { description: 'self, user' }),
  },
  { title: 'Suspension' },
);
export type Suspension = Static<typeof SuspensionSchema>;

export const SuspensionBodySchema = Type.Object(
  {
    reason: Text(1, 1000, 'Why the account is suspended; shown to admins only'),
    userId: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
    createdAt: ReadOnlyEcho.createdAt,
    links: ReadOnlyEcho.links,
  },
  { additionalProperties: false, title: 'SuspensionBody' },
);
