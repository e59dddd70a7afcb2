import { Type, type Static } from 'typebox';
import {
  Id,
  IdParam,
  LinksSchema,
  PageQuerySchema,
  ReadOnlyEcho,
  STORABLE_TEXT_PATTERN,
  Text,
  Timestamp,
  USERNAME_PATTERN,
} from '../../shared/schemas.js';
import { UserSearchParam } from '../search/search.schemas.js';

export const Username = Type.String({
  pattern: USERNAME_PATTERN,
  description: '3–32 letters, digits or underscores; unique regardless of case',
  examples: ['ada_l'],
});
const Password = (description: string) =>
  Type.String({ minLength: 8, maxLength: 256, pattern: STORABLE_TEXT_PATTERN, description, examples: ['correct horse battery'] });
const DisplayName = Text(0, 64, 'Shown instead of the username; may be empty');
const Bio = Text(0, 500, 'About the user; may be empty');
export const RoleSchema = Type.Enum(['member', 'admin'], { description: 'Only an admin may change it' });

export const UserSchema = Type.Object(
  {
    id: Id,
    username: Type.String(),
    displayName: Type.String(),
    bio: Type.String(),
    role: RoleSchema,
    followerCount: Type.Integer({ minimum: 0 }),
    followingCount: Type.Integer({ minimum: 0 }),
    postCount: Type.Integer({ minimum: 0 }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    links: Type.Array(LinksSchema.items, { description: 'self, followers, following, posts' }),
  },
  { title: 'User' },
);
export type User = Static<typeof UserSchema>;

export const UserParamsSchema = Type.Object({ user_id: IdParam('The user id') });

export const CreateUserBodySchema = Type.Object(
  {
    username: Username,
    password: Password('8–256 characters; never returned'),
    displayName: Type.Optional(DisplayName),
    bio: Type.Optional(Bio),
  },
  { additionalProperties: false, title: 'NewUser' },
);

/** PUT replaces the whole representation: every writable field is required (not a patch). */
export const ReplaceUserBodySchema = Type.Object(
  {
    username: Username,
    displayName: DisplayName,
    bio: Bio,
    role: Type.Optional(RoleSchema),
    ...ReadOnlyEcho,
    followerCount: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
    followingCount: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
    postCount: Type.Optional(Type.Unknown({ description: 'Read-only; ignored' })),
  },
  { additionalProperties: false, title: 'UserReplacement' },
);

export const ChangePasswordBodySchema = Type.Object(
  {
    currentPassword: Text(1, 256),
    newPassword: Password('8–256 characters'),
  },
  { additionalProperties: false, title: 'PasswordChange' },
);

export const ListUsersQuerySchema = Type.Object({
  ...PageQuerySchema.properties,
  username: Type.Optional(Text(0, 64, 'Exact username, compared case-insensitively')),
  q: UserSearchParam,
});
