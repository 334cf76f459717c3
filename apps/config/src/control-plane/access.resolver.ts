import { UseGuards } from '@nestjs/common';
import { Args, Context, Float, Int, Mutation, Query, Resolver } from '@nestjs/graphql';
import type { RoleGrant } from '@tessera/core';
import { GRAPHQL_ACCESS_RULES, doorsAllowed } from '@tessera/protocol';
import { AccessControlService, type Actor } from '../access/access-control.service.js';
import { AccessStore } from '../access/access.store.js';
import { ApiKeyType, AuditEntryType, CreatedApiKeyType, RoleGrantInput, UserType, WhoAmIType } from './access-types.js';
import type { ControlPlaneContext } from './control-plane-context.js';
import { ControlPlaneGuard } from './control-plane.guard.js';

/** Who called, as the audit log records it (the guard has verified the principal, if any). */
async function actorOf(context: ControlPlaneContext): Promise<Actor> {
  const principal = context.principal === undefined ? undefined : await context.principal;
  return { user: principal?.user ?? null, remoteAddress: context.remoteAddress ?? null };
}

/** Users, their roles and API keys (userAdmin), the signed-in user, and the audit log. */
@Resolver()
@UseGuards(ControlPlaneGuard)
export class AccessResolver {
  constructor(
    private readonly access: AccessControlService,
    private readonly store: AccessStore,
  ) {}

  @Query(() => WhoAmIType, { description: 'The signed-in user, its roles and what they allow.' })
  async whoAmI(@Context() context: ControlPlaneContext): Promise<WhoAmIType> {
    const principal = await context.principal!;
    return {
      user: principal.user,
      roles: [...principal.roles],
      keyId: principal.keyId ?? null,
      allowed: doorsAllowed(GRAPHQL_ACCESS_RULES, principal.roles),
    };
  }

  @Query(() => [UserType], { description: 'Every user, by name (viewUser).' })
  users(): Promise<UserType[]> {
    return this.access.users();
  }

  @Query(() => [ApiKeyType], { description: "Every API key, or one user's (viewUser): ids and owners, never the keys." })
  apiKeys(@Args('user', { type: () => String, nullable: true }) user?: string): Promise<ApiKeyType[]> {
    return this.access.apiKeys(user ?? undefined);
  }

  @Query(() => [AuditEntryType], { description: 'The audit log, newest first (viewAuditLog: clusterMonitor and above).' })
  auditLog(
    @Args('first', { type: () => Int, defaultValue: 100 }) first: number,
    @Args('before', { type: () => Float, nullable: true, description: 'a seq: entries older than it' }) before?: number,
    @Args('user', { type: () => String, nullable: true }) user?: string,
    @Args('action', { type: () => String, nullable: true }) action?: string,
  ): Promise<AuditEntryType[]> {
    return this.store.audit({
      limit: Math.min(Math.max(first, 1), 1_000),
      ...(before !== undefined && before !== null ? { beforeSeq: before } : {}),
      ...(user ? { user } : {}),
      ...(action ? { action } : {}),
    });
  }

  @Mutation(() => UserType, { description: 'Creates a user with built-in roles and, optionally, a password (12+ characters).' })
  async createUser(
    @Context() context: ControlPlaneContext,
    @Args('name') name: string,
    @Args('roles', { type: () => [RoleGrantInput] }) roles: RoleGrantInput[],
    @Args('password', { type: () => String, nullable: true }) password?: string,
  ): Promise<UserType> {
    return this.access.createUser(await actorOf(context), { name, roles: roles as RoleGrant[], ...(password ? { password } : {}) });
  }

  @Mutation(() => UserType, { description: "Sets a user's roles and/or password (null: no password)." })
  async updateUser(
    @Context() context: ControlPlaneContext,
    @Args('name') name: string,
    @Args('roles', { type: () => [RoleGrantInput], nullable: true }) roles?: RoleGrantInput[],
    @Args('password', { type: () => String, nullable: true }) password?: string | null,
  ): Promise<UserType> {
    return this.access.updateUser(await actorOf(context), {
      name,
      ...(roles ? { roles: roles as RoleGrant[] } : {}),
      ...(password !== undefined ? { password } : {}),
    });
  }

  @Mutation(() => Boolean, { description: 'Drops a user and its API keys.' })
  async dropUser(@Context() context: ControlPlaneContext, @Args('name') name: string): Promise<boolean> {
    await this.access.dropUser(await actorOf(context), name);
    return true;
  }

  @Mutation(() => CreatedApiKeyType, { description: 'A new API key for a user: the key is in this answer and nowhere else.' })
  async createApiKey(
    @Context() context: ControlPlaneContext,
    @Args('user') user: string,
    @Args('description', { type: () => String, nullable: true }) description?: string,
  ): Promise<CreatedApiKeyType> {
    return this.access.createApiKey(await actorOf(context), { user, ...(description ? { description } : {}) });
  }

  @Mutation(() => Boolean, { description: 'Revokes an API key: routers refuse it once they read the new users generation.' })
  async revokeApiKey(@Context() context: ControlPlaneContext, @Args('id') id: string): Promise<boolean> {
    await this.access.revokeApiKey(await actorOf(context), id);
    return true;
  }
}
