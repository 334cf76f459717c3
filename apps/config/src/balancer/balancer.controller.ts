import { Body, Controller, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import { type BalancerCollectionStatus, type BalancerStatus, type MoveTopChunkResult, namespaceSchema } from '@tessera/protocol';
import { BalancerService } from './balancer.service.js';
import { ForegroundLoadStore } from './foreground-load.store.js';

/**
 * MongoDB's balancerStatus and balancerCollectionStatus, the shards' top-chunk requests and the
 * routers' foreground load reports, on the internal (signed) API.
 */
@Controller('internal/balancer')
@UseGuards(ClusterAuthGuard)
export class BalancerController {
  constructor(
    private readonly balancer: BalancerService,
    private readonly loads: ForegroundLoadStore,
  ) {}

  @Get('status')
  status(): Promise<BalancerStatus> {
    return this.balancer.status();
  }

  @Get('collectionStatus/:ns')
  collectionStatus(@Param('ns') ns: string): Promise<BalancerCollectionStatus> {
    return this.balancer.collectionStatus(parseWith(namespaceSchema, ns, 'namespace'));
  }

  /** A router's foreground writes over its last window (`ForegroundLoadService`), for the throttle. */
  @Post('foregroundLoad')
  @HttpCode(200)
  async foregroundLoad(@Body() body: unknown): Promise<{ ok: 1 }> {
    await this.loads.save(body as never);
    return { ok: 1 };
  }

  /** A shard's auto-splitter split off the top chunk of a collection and asks that it move away. */
  @Post('moveTopChunk')
  @HttpCode(200)
  moveTopChunk(@Body() body: unknown): Promise<MoveTopChunkResult> {
    return this.balancer.moveTopChunk(body as never);
  }
}
