import { Body, Controller, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import { type BalancerCollectionStatus, type BalancerStatus, type MoveTopChunkResult, namespaceSchema } from '@tessera/protocol';
import { BalancerService } from './balancer.service.js';

/** MongoDB's balancerStatus and balancerCollectionStatus, and the shards' top-chunk requests, on the internal (signed) API. */
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

  /** A shard's auto-splitter split off the top chunk of a collection and asks that it move away. */
  @Post('moveTopChunk')
  @HttpCode(200)
  moveTopChunk(@Body() body: unknown): Promise<MoveTopChunkResult> {
    return this.balancer.moveTopChunk(body as never);
  }
}
