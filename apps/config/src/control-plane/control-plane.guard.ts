import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { GqlExecutionContext } from '@nestjs/graphql';
import type { GraphQLResolveInfo } from 'graphql';
import { TesseraError } from '@tessera/core';
import { GRAPHQL_ACCESS_RULES, type Principal, missingPrivilege, notAuthorized } from '@tessera/protocol';
import { AccessControlService } from '../access/access-control.service.js';
import { ConfigAuthentication } from '../access/config-authentication.service.js';
import type { ControlPlaneContext } from './control-plane-context.js';

/** Loopback addresses: MongoDB's localhost exception admits only callers on the same machine. */
const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * Every root field of the control plane checks its caller against GRAPHQL_ACCESS_RULES: no
 * verified user is UNAUTHORIZED (or AUTHENTICATION_FAILED for wrong credentials); a user without
 * an action the field's rule needs on what its arguments name is FORBIDDEN. Both reach the client
 * as `extensions.code`. A field without a rule is refused (the rule test keeps there being none).
 * A refused mutation is written to the audit log. MongoDB's localhost exception: while no user exists, `createUser` is open to callers on
 * 127.0.0.1, so a cluster started by hand can be given its first user.
 */
@Injectable()
export class ControlPlaneGuard implements CanActivate {
  constructor(
    private readonly authentication: ConfigAuthentication,
    private readonly access: AccessControlService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const gql = GqlExecutionContext.create(context);
    const operation = gql.getContext<ControlPlaneContext>();
    const info = gql.getInfo<GraphQLResolveInfo>();
    const field = `${info.parentType.name}.${info.fieldName}`;
    const rule = GRAPHQL_ACCESS_RULES[field];
    if (rule === undefined) throw new TesseraError('FORBIDDEN', `no access rule names ${field}`);
    if (rule.kind === 'public') return true;
    if (field === 'Mutation.createUser' && (await this.localhostException(operation))) return true;
    operation.principal ??= this.authentication.principalOf(operation.authorization, operation.remoteAddress);
    const principal: Principal = await operation.principal;
    if (rule.kind === 'signedIn') return true;
    const missing = missingPrivilege(rule, { params: {}, body: gql.getArgs() }, principal.roles);
    if (missing === undefined) return true;
    if (info.parentType.name === 'Mutation') {
      await this.access.audit({
        user: principal.user,
        remoteAddress: operation.remoteAddress ?? null,
        node: this.access.node,
        action: info.fieldName,
        target: null,
        outcome: 'refused',
        details: { needs: missing.action },
      });
    }
    throw notAuthorized(missing);
  }

  private async localhostException(operation: ControlPlaneContext): Promise<boolean> {
    const absent = operation.authorization === undefined || operation.authorization === null || operation.authorization === '';
    return absent && LOOPBACK.has(operation.remoteAddress ?? '') && (await this.access.noUsers());
  }
}
