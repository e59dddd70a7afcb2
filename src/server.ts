// First, before anything else runs: see the module for why.
import './shared/tick-shape.js';
import closeWithGrace from 'close-with-grace';
import { buildApp } from './app.js';
import { shutdown } from './shutdown.js';
import { ConfigError, loadConfig } from './config.js';
import { ensureAdmin } from './modules/users/users.service.js';

const SECOND_SIGNAL = 'second signal: closing the connections still open now';

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
    const outcome = await ensureAdmin(app.store, config.adminUsername, config.adminPassword, config.passwordHashMemoryKib, { promote: false });
    if (outcome === 'exists as a member') {
      app.log.warn({ username: config.adminUsername, outcome }, 'admin bootstrap: ADMIN_USERNAME names an existing member, left as is (promote with `corkboard create-admin`)');
    } else {
      app.log.info({ username: config.adminUsername, outcome }, 'admin bootstrap');
    }
  }

  // SIGTERM/SIGINT (CONTRACT §5): stop accepting, let in-flight requests finish (answered `Connection: close`, see
  // app.ts; Fastify answers 503 to new requests on open connections meanwhile), close idle keep-alive connections,
  // cut off whatever is still open after SHUTDOWN_GRACE_MS (a client still sending, a stream), close the database
  // (onClose), exit 0. close-with-grace's own timer is only a backstop past that, for a close() that hangs.
  // A signal exits 0, always (CONTRACT §5): a failing or hanging close is logged, not turned into exit code 1,
  // which supervisors read as a crash. An uncaught error still exits 1.
  let bySignal = false;
  closeWithGrace(
    {
      delay: config.shutdownGraceMs + 5_000,
      onTimeout: (delay) => {
        app.log.error({ delay }, 'shutdown did not finish in time: exiting');
        if (bySignal) process.exit(0);
      },
    },
    async ({ signal, err }) => {
      if (err) {
        app.log.error({ err }, 'shutting down after an error');
        await shutdown(app, config.shutdownGraceMs);
        return;
      }
      bySignal = true;
      // close-with-grace exits 1 on a second signal; a signal exits 0 here, always. A second SIGTERM or SIGINT (a
      // supervisor repeating itself, an impatient Ctrl-C) cuts the grace period short instead: the connections
      // still open are closed now, and the database still closes before the exit. The new listener goes on before
      // the old one comes off: with none left, Node closes its signal watcher and drops a signal already caught.
      const hurry = (again: NodeJS.Signals) => {
        app.log.warn({ signal: again }, SECOND_SIGNAL);
        app.server.closeAllConnections();
      };
      for (const name of ['SIGTERM', 'SIGINT'] as const) {
        process.on(name, hurry);
        for (const listener of process.listeners(name)) if (listener !== hurry) process.removeListener(name, listener);
      }
      app.log.info({ signal }, 'shutting down');
      try {
        await shutdown(app, config.shutdownGraceMs);
      } catch (error) {
        app.log.error({ err: error }, 'shutdown failed');
      }
    },
  );

  await app.listen({ port: config.port, host: config.host }).catch((error: unknown) => {
    // An address that does not resolve or is not this host's (HOST=256.0.0.1), or a port in use: name the variables.
    throw new Error(`HOST/PORT: cannot listen on ${config.host}:${config.port}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`corkboard: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
