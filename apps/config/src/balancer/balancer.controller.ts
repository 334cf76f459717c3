import { Controller, Get, Param, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import { type BalancerCollectionStatus, type BalancerStatus, namespaceSchema } from '@tessera/protocol';
import { BalancerService } from './balancer.service.js';

/** MongoDB's balancerStatus and balancerCollectionStatus on the internal API. */
@Controller('internal/balancer')
@UseGuards(ClusterAuthGuard)
export class BalancerController {
  constructor(private readonly balancer: BalancerService) {}

  @Get('status')
  status(): Promise<BalancerStatus> {
    return this.balancer.status();
  }

  @Get('collectionStatus/:ns')
  collectionStatus(@Param('ns') ns: string): Promise<BalancerCollectionStatus> {
    return this.balancer.collectionStatus(parseWith(namespaceSchema, ns, 'namespace'));
  }
}
