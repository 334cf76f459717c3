import { UseGuards, UseInterceptors } from '@nestjs/common';
import { Args, Float, Mutation, Query, Resolver } from '@nestjs/graphql';
import { InternalClients } from '@tessera/platform';
import type { BalancerStatus, ClusterSettings, UpdateSettingsRequest } from '@tessera/protocol';
import { BalancerService } from '../balancer/balancer.service.js';
import { LeaderService } from '../leader/leader.service.js';
import { ClusterSettingsService } from '../settings/cluster-settings.service.js';
import { BalancerCollectionStatusType, BalancerStatusType, ClusterSettingsInput, ClusterSettingsType } from './balancer-types.js';
import { AuditInterceptor } from './audit.interceptor.js';
import { ControlPlaneGuard } from './control-plane.guard.js';
import { ControlPlaneReadsService } from './control-plane-reads.service.js';
import { CollectionType } from './graphql-types.js';

/**
 * The balancer on the control plane: MongoDB's balancerStatus, balancerCollectionStatus,
 * balancerStart/balancerStop (setBalancerState), the balancer and chunk size settings, and
 * configureCollectionBalancing. Settings live in the config database, so any config process
 * changes them; the last round is the leader's, so balancerStatus asks the leader.
 */
@Resolver()
@UseGuards(ControlPlaneGuard)
@UseInterceptors(AuditInterceptor)
export class BalancerResolver {
  constructor(
    private readonly balancer: BalancerService,
    private readonly settings: ClusterSettingsService,
    private readonly leader: LeaderService,
    private readonly clients: InternalClients,
    private readonly reads: ControlPlaneReadsService,
  ) {}

  @Query(() => BalancerStatusType, { description: 'The mode, whether a round is running, and the last round (from the config leader).' })
  async balancerStatus(): Promise<BalancerStatusType> {
    return balancerStatusOf(await this.leaderStatus());
  }

  @Query(() => BalancerCollectionStatusType, {
    description: 'Whether the balancer would leave the collection as it is now, and if not the first rule it breaks.',
  })
  async balancerCollectionStatus(@Args('ns') ns: string): Promise<BalancerCollectionStatusType> {
    const status = await this.balancer.collectionStatus(ns);
    return { balancerCompliant: status.balancerCompliant, firstComplianceViolation: status.firstComplianceViolation ?? null };
  }

  @Query(() => ClusterSettingsType, { description: 'The balancer settings, the default chunk size and the auto-split switch.' })
  async clusterSettings(): Promise<ClusterSettingsType> {
    return this.settings.get();
  }

  @Mutation(() => BalancerStatusType, { description: "Turns the balancer on (mode full) or off (MongoDB's balancerStart/balancerStop)." })
  async setBalancerState(@Args('enabled') enabled: boolean): Promise<BalancerStatusType> {
    await this.settings.update({ balancer: { mode: enabled ? 'full' : 'off' } });
    return balancerStatusOf(await this.leaderStatus());
  }

  @Mutation(() => ClusterSettingsType, { description: 'Changes the fields given and answers the settings as they are now.' })
  async updateClusterSettings(@Args('input') input: ClusterSettingsInput): Promise<ClusterSettingsType> {
    return this.settings.update(updateRequestOf(input));
  }

  @Mutation(() => CollectionType, {
    description:
      "MongoDB's configureCollectionBalancing: the collection's max chunk size (null: back to the cluster's), balancing, the auto-merger and defragmentation on or off.",
  })
  async configureCollectionBalancing(
    @Args('ns') ns: string,
    @Args('chunkSizeBytes', { type: () => Float, nullable: true, description: 'At least 65536 (64 KiB); null: the cluster default' })
    chunkSizeBytes?: number | null,
    @Args('enableBalancing', { type: () => Boolean, nullable: true }) enableBalancing?: boolean | null,
    @Args('enableAutoMerger', { type: () => Boolean, nullable: true }) enableAutoMerger?: boolean | null,
    @Args('defragmentCollection', {
      type: () => Boolean,
      nullable: true,
      description: 'true starts defragmenting the collection (from its first phase); false stops it',
    })
    defragmentCollection?: boolean | null,
  ): Promise<CollectionType> {
    await this.settings.configureCollectionBalancing({
      ns,
      ...(chunkSizeBytes !== undefined ? { chunkSizeBytes } : {}),
      ...(enableBalancing != null ? { enableBalancing } : {}),
      ...(enableAutoMerger != null ? { enableAutoMerger } : {}),
      ...(defragmentCollection != null ? { defragmentCollection } : {}),
    });
    return this.reads.collection(ns);
  }

  private async leaderStatus(): Promise<BalancerStatus> {
    if (this.leader.isLeader) return this.balancer.status();
    const leader = await this.leader.leader();
    return leader ? this.clients.config(leader.url).balancerStatus() : this.balancer.status();
  }
}

function balancerStatusOf(status: BalancerStatus): BalancerStatusType {
  const round = status.lastRound;
  return {
    mode: status.mode,
    inBalancerRound: status.inBalancerRound,
    throttle: status.throttle,
    lastRound: round && { ...round, errors: round.errors.map((e) => ({ ns: e.ns ?? null, code: e.code, message: e.message })) },
  };
}

function updateRequestOf(input: ClusterSettingsInput): UpdateSettingsRequest {
  const balancer: NonNullable<UpdateSettingsRequest['balancer']> = {};
  if (input.balancerMode != null) balancer.mode = input.balancerMode as ClusterSettings['balancer']['mode'];
  if (input.activeWindow !== undefined) balancer.activeWindow = input.activeWindow && { ...input.activeWindow };
  if (input.waitForDelete != null) balancer.waitForDelete = input.waitForDelete;
  if (input.policy != null) balancer.policy = input.policy as ClusterSettings['balancer']['policy'];
  if (input.attemptToBalanceJumboChunks != null) balancer.attemptToBalanceJumboChunks = input.attemptToBalanceJumboChunks;
  if (input.scheduler != null) balancer.scheduler = input.scheduler as ClusterSettings['balancer']['scheduler'];
  if (input.maxDonationsPerShard != null) balancer.maxDonationsPerShard = input.maxDonationsPerShard;
  return {
    ...(Object.keys(balancer).length > 0 ? { balancer } : {}),
    ...(input.chunkSizeBytes != null ? { chunkSizeBytes: input.chunkSizeBytes } : {}),
    ...(input.autoSplit != null ? { autoSplit: input.autoSplit } : {}),
  };
}
