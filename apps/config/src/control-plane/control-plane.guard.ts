import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { GqlExecutionContext } from '@nestjs/graphql';
import { assertAllowed } from './control-plane-auth.js';
import type { ControlPlaneContext } from './control-plane-context.js';

/**
 * Every root field of the control plane: mutations need the admin token, queries and
 * subscriptions a viewer (or admin) token. Throws `UNAUTHORIZED`, which reaches the client as
 * `extensions.code`.
 */
@Injectable()
export class ControlPlaneGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const gql = GqlExecutionContext.create(context);
    const { role } = gql.getContext<ControlPlaneContext>();
    assertAllowed(role, gql.getInfo<{ operation: { operation: string } }>().operation.operation === 'mutation' ? 'change' : 'read');
    return true;
  }
}
