import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { type AuthResource, TesseraError } from '@tessera/core';
import { sendError } from '@tessera/platform';
import { type AccessRule, type Principal, REST_ACCESS_RULES, missingPrivilege, notAuthorized } from '@tessera/protocol';
import type { RouterAudit } from './router-audit.service.js';
import type { RouterAuthentication } from './router-authentication.service.js';
import { ownSessions } from './session-owner.js';

const principals = new WeakMap<FastifyRequest, Principal>();

/** The verified caller of a public API request (undefined when authorization is disabled or the route is public). */
export function principalOfRequest(request: FastifyRequest): Principal | undefined {
  return principals.get(request);
}

/** The user name of a request's verified caller: the owner of what it opens (cursors). */
export function callerOf(request: FastifyRequest): string | undefined {
  return principals.get(request)?.user;
}

/** Each route's rule, by `METHOD url` as Fastify names the route: worked out once per route. */
const rulesByRoute = new Map<string, AccessRule | undefined>();

/** The rule of a request's route, `METHOD /path/{param}` as REST_ACCESS_RULES keys it. */
function ruleOf(request: FastifyRequest): AccessRule | undefined {
  const route = request.routeOptions.url;
  if (route === undefined) return undefined;
  const key = `${request.method} ${route}`;
  if (!rulesByRoute.has(key)) rulesByRoute.set(key, REST_ACCESS_RULES[`${request.method} ${route.replace(/:(\w+)/g, '{$1}')}`]);
  return rulesByRoute.get(key);
}

/**
 * Every route of the public API (under `/v1/`, Nest's and the hot routes alike) checks its
 * caller against REST_ACCESS_RULES: on request, before the body is read, a caller without a
 * verified identity is answered 401 (so an anonymous body is never parsed); before the handler,
 * the actions the route's rule needs on what the input names are checked against the caller's
 * roles, and a missing one is audited (`authCheck`) and answered 403 Unauthorized; then the
 * session ids the body names become the caller's own (`ownSessions`). Once answered, the admin
 * commands are audited. A route under `/v1/` without a rule is refused (the rule test keeps
 * there being none). Install before any other public hook, so that nothing of a refused request
 * runs.
 */
export function installAccessControl(
  fastify: FastifyInstance,
  authentication: RouterAuthentication,
  audit: RouterAudit,
  logger: Logger,
): void {
  // A callback hook, not an async one: a caller verified before passes without a promise.
  fastify.addHook('onRequest', (request, reply, done) => {
    // By the route matched, not the URL sent: no spelling of a path reaches a /v1/ route unchecked.
    if (request.routeOptions.url?.startsWith('/v1/') !== true) return done();
    const rule = ruleOf(request);
    if (rule?.kind === 'public') return done();
    const known = rule === undefined ? undefined : authentication.cached(request.headers.authorization, request.raw.socket);
    if (known !== undefined) {
      principals.set(request, known);
      return done();
    }
    const verified =
      rule === undefined
        ? Promise.reject(new TesseraError('FORBIDDEN', 'no access rule names this route'))
        : authentication.principalOf(request.headers.authorization, request.ip);
    verified.then(
      (principal) => {
        principals.set(request, principal);
        done();
      },
      (error: unknown) => sendError(request, reply, error, logger),
    );
  });
  fastify.addHook('preHandler', (request, reply, done) => {
    const principal = principals.get(request);
    if (principal === undefined) return done();
    const rule = ruleOf(request);
    if (rule?.kind === 'privileges') {
      const missing = missingPrivilege(rule, { params: request.params as Record<string, string>, body: request.body }, principal.roles);
      if (missing !== undefined) {
        audit.record({
          user: principal.user,
          remoteAddress: request.ip,
          action: 'authCheck',
          target: targetOf(missing.resource),
          outcome: 'refused',
          details: { route: `${request.method} ${request.routeOptions.url}`, missing: missing.action },
        });
        sendError(request, reply, notAuthorized(missing), logger);
        return;
      }
    }
    ownSessions(request.body, principal);
    done();
  });
  // The public API's admin commands are audited once answered, as the control plane's mutations are.
  fastify.addHook('onResponse', (request, reply, done) => {
    const command = ADMIN_COMMANDS[`${request.method} ${request.routeOptions.url}`];
    const principal = principals.get(request);
    if (command !== undefined && principal !== undefined) {
      const params = request.params as Record<string, string | undefined>;
      const body = request.body as Record<string, unknown> | undefined;
      const target = params.db !== undefined && params.coll !== undefined ? `${params.db}.${params.coll}` : body?.renameCollection;
      audit.record({
        user: principal.user,
        remoteAddress: request.ip,
        action: command,
        target: typeof target === 'string' ? target : null,
        outcome: reply.statusCode < 400 ? 'ok' : reply.statusCode === 401 || reply.statusCode === 403 ? 'refused' : 'failed',
        details: {
          status: reply.statusCode,
          ...(params.name === undefined ? {} : { index: params.name }),
          ...(body?.to === undefined ? {} : { to: body.to }),
        },
      });
    }
    done();
  });
}

/** The public API's admin commands, by Fastify's `METHOD url`, with MongoDB's command names. */
const ADMIN_COMMANDS: Readonly<Record<string, string>> = {
  'POST /v1/:db/:coll/indexes': 'createIndexes',
  'DELETE /v1/:db/:coll/indexes/:name': 'dropIndexes',
  'POST /v1/admin/renameCollection': 'renameCollection',
  'POST /v1/admin/killSessions': 'killSessions',
};

/** An audit entry's target: `db.coll`, `db` or `cluster`. */
function targetOf(resource: AuthResource): string {
  if ('cluster' in resource) return 'cluster';
  return resource.collection === undefined || resource.collection === '' ? resource.db : `${resource.db}.${resource.collection}`;
}
