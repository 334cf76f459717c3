import { type CallHandler, type ExecutionContext, Inject, Injectable, type NestInterceptor } from '@nestjs/common';
import { GqlExecutionContext } from '@nestjs/graphql';
import type { GraphQLResolveInfo } from 'graphql';
import type { Logger } from 'pino';
import { type Observable, tap } from 'rxjs';
import { TesseraError } from '@tessera/core';
import { LOGGER } from '@tessera/platform';
import { AccessControlService } from '../access/access-control.service.js';
import type { ControlPlaneContext } from './control-plane-context.js';

/** Mutations that write their own audit entry, in the transaction of their change. */
const SELF_AUDITED = new Set(['createUser', 'updateUser', 'dropUser', 'createApiKey', 'revokeApiKey']);

/** What an admin action acted on, from its arguments: a namespace, a database, a shard, a session. */
function targetOf(args: Record<string, unknown>): string | null {
  const input = args.input as Record<string, unknown> | undefined;
  for (const value of [args.ns, input?.ns, args.db, args.name, args.shard, args.lsid]) if (typeof value === 'string') return value;
  return null;
}

/**
 * Writes every control-plane mutation to the audit log once it has ended (DDL, balancer settings,
 * moves, zones, shards, transaction kills): who, from where, which mutation on what, with its
 * arguments, and whether it succeeded (`ok`) or failed with which code (`failed`). A refusal by
 * the guard is audited there (`refused`). An audit write that fails is logged and does not fail
 * the mutation, which has already happened.
 */
@Injectable()
export class AuditInterceptor implements NestInterceptor {
  constructor(
    private readonly access: AccessControlService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const gql = GqlExecutionContext.create(context);
    const info = gql.getInfo<GraphQLResolveInfo | undefined>();
    if (info?.parentType.name !== 'Mutation' || SELF_AUDITED.has(info.fieldName)) return next.handle();
    const args = gql.getArgs<Record<string, unknown>>();
    const operation = gql.getContext<ControlPlaneContext>();
    const record = (outcome: 'ok' | 'failed', error?: unknown) =>
      void this.write(operation, info.fieldName, args, outcome, error).catch((failure: unknown) =>
        this.logger.error({ err: failure, action: info.fieldName }, 'could not write an audit entry'),
      );
    return next.handle().pipe(tap({ next: () => record('ok'), error: (error: unknown) => record('failed', error) }));
  }

  private async write(
    operation: ControlPlaneContext,
    action: string,
    args: Record<string, unknown>,
    outcome: 'ok' | 'failed',
    error?: unknown,
  ) {
    const principal = operation.principal === undefined ? undefined : await operation.principal.catch(() => undefined);
    await this.access.audit({
      user: principal?.user ?? null,
      remoteAddress: operation.remoteAddress ?? null,
      node: this.access.node,
      action,
      target: targetOf(args),
      outcome,
      details: { args, ...(error === undefined ? {} : { error: error instanceof TesseraError ? error.code : 'INTERNAL' }) },
    });
  }
}
