import closeWithGrace from 'close-with-grace';
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { ensureAdmin } from './modules/users/users.service.js';

/** Entry point only: load the config, build the app, bootstrap the admin, listen, and shut down gracefully. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`corkboard: invalid configuration: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }

  const app = await buildApp(config);
  if (config.adminUsername && config.adminPassword) {
    const outcome = await ensureAdmin(app.store, config.adminUsername, config.adminPassword, config.passwordHashMemoryKib);
    app.log.info({ username: config.adminUsername, outcome }, 'admin bootstrap');
  }

  // SIGTERM/SIGINT: stop accepting, let in-flight requests finish (Fastify answers 503 to new ones meanwhile),
  // close the database (onClose), exit 0. A second signal or 10 s without finishing forces the exit.
  closeWithGrace({ delay: 10_000 }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'shutting down after an error');
    else app.log.info({ signal }, 'shutting down');
    await app.close();
  });

  await app.listen({ port: config.port, host: config.host });
}

main().catch((error: unknown) => {
  process.stderr.write(`corkboard: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
