import type { FastifyPluginAsync } from 'fastify';
import systemRoutes from './system/system.routes.js';
import usersRoutes from './users/users.routes.js';
import tokensRoutes from './tokens/tokens.routes.js';
import postsRoutes from './posts/posts.routes.js';
import feedRoutes from './feed/feed.routes.js';
import followersRoutes from './followers/followers.routes.js';
import repliesRoutes from './replies/replies.routes.js';
import recommendsRoutes from './recommends/recommends.routes.js';
import boardsRoutes from './boards/boards.routes.js';
import reportsRoutes from './reports/reports.routes.js';
import notificationsRoutes from './notifications/notifications.routes.js';
import blocksRoutes from './blocks/blocks.routes.js';
import mutesRoutes from './mutes/mutes.routes.js';
import suspensionsRoutes from './suspensions/suspensions.routes.js';
import adminRoutes from './admin/admin.routes.js';

/** Every resource module, registered explicitly (no autoload): the list below is the whole API. */
const modules: FastifyPluginAsync = async (app) => {
  await app.register(systemRoutes);
  await app.register(usersRoutes);
  await app.register(tokensRoutes);
  await app.register(postsRoutes);
  await app.register(feedRoutes);
  await app.register(followersRoutes);
  await app.register(repliesRoutes);
  await app.register(recommendsRoutes);
  await app.register(boardsRoutes);
  await app.register(reportsRoutes);
  await app.register(notificationsRoutes);
  await app.register(blocksRoutes);
  await app.register(mutesRoutes);
  await app.register(suspensionsRoutes);
  // The moderation page (not an API operation): static files that call the routes above.
  await app.register(adminRoutes);
};

export default modules;
