import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { GqlExecutionContext } from '@nestjs/graphql';
import { ADMIN_ONLY } from './admin-only.decorator.js';
import { assertAllowed } from './control-plane-auth.js';
import type { ControlPlaneContext } from './control-plane-context.js';

/**
 * Every root field of the control plane: mutations and queries marked `@AdminOnly()` need the
 * admin token, other queries and subscriptions a viewer (or admin) token. Throws `UNAUTHORIZED`,
 * which reaches the client as `extensions.code`.
 */
@Injectable()
export class ControlPlaneGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    const gql = GqlExecutionContext.create(context);
    const { role } = gql.getContext<ControlPlaneContext>();
    const operation = gql.getInfo<{ operation: { operation: string } }>().operation.operation;
    const adminOnly =
      this.reflector.getAllAndOverride<boolean | undefined>(ADMIN_ONLY, [context.getHandler(), context.getClass()]) === true;
    assertAllowed(role, operation === 'mutation' ? 'change' : adminOnly ? 'adminRead' : 'read');
    return true;
  }
}
