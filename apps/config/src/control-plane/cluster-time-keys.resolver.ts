import { UseGuards } from '@nestjs/common';
import { Query, Resolver } from '@nestjs/graphql';
import { ClusterTimeKeysService } from '../clock/cluster-time-keys.service.js';
import { ControlPlaneGuard } from './control-plane.guard.js';
import { ClusterTimeKeyType } from './graphql-types.js';

/** The ClusterTime signing keys, for operators watching rotation: ids and expiries, never the secrets. */
@Resolver()
@UseGuards(ControlPlaneGuard)
export class ClusterTimeKeysResolver {
  constructor(private readonly keys: ClusterTimeKeysService) {}

  @Query(() => [ClusterTimeKeyType], {
    description: 'Every ClusterTime signing key generated, newest first (viewClusterTimeKeys: clusterAdmin, root).',
  })
  async clusterTimeKeys(): Promise<ClusterTimeKeyType[]> {
    return (await this.keys.expiries()).map((k) => ({ keyId: k.keyId, expiresAt: k.expiresAt.toISOString() }));
  }
}
