import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Logger } from 'pino';

/**
 * Where `npm run build` puts the dashboard: dist/dashboard, beside dist/apps (this file compiles to
 * dist/apps/config/src/dashboard/).
 */
export const BUILT_DASHBOARD_DIR = fileURLToPath(new URL('../../../../dashboard', import.meta.url));

/**
 * The browser's rules for the dashboard: scripts, styles and data from this origin only (its
 * GraphQL socket included), no frames, no plugins. Nothing is fetched from elsewhere, so it works
 * offline.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self' ws: wss:",
  "object-src 'none'",
  "frame-ancestors 'none'",
  "base-uri 'self'",
  "form-action 'self'",
].join('; ');

/**
 * Serves the dashboard's static files at `/` (index.html) and `/assets/...`: the files found at
 * start, each a route of its own (no wildcard, so every other path stays with the control plane's
 * routes). Hashed assets are cached for a year; index.html is revalidated, so a new build shows
 * at the next load. A server built without the dashboard logs that and serves none.
 */
export function serveDashboard(app: NestFastifyApplication, directory: string, logger: Logger, url: string): void {
  if (!existsSync(join(directory, 'index.html'))) {
    logger.warn({ directory }, 'no dashboard build found (npm run build makes it): the dashboard is not served');
    return;
  }
  app.useStaticAssets({
    root: directory,
    prefix: '/',
    wildcard: false,
    index: 'index.html',
    // @fastify/static 10 hands setHeaders Fastify's reply (Nest's option type still names the raw response).
    setHeaders: ((reply: { header(name: string, value: string): unknown }, path: string) => {
      reply.header('content-security-policy', DASHBOARD_CSP);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('referrer-policy', 'no-referrer');
      reply.header('cache-control', path.endsWith('index.html') ? 'no-cache' : 'public, max-age=31536000, immutable');
    }) as never,
  });
  logger.info({ directory }, `dashboard at ${url}/`);
}
