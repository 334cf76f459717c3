import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { DataSizeResult, SplitVectorResult, StatsForBalancingResult } from '@tessera/protocol';
import { ChunkSizingService } from './chunk-sizing.service.js';
import { SplitVectorService } from './split-vector.service.js';

/** Chunk sizing commands (MongoDB's dataSize, splitVector and statsForBalancing), for splits and the balancer. */
@Controller('internal/chunks')
@UseGuards(ClusterAuthGuard)
export class ChunksController {
  constructor(
    private readonly sizing: ChunkSizingService,
    private readonly splitter: SplitVectorService,
  ) {}

  @Post('dataSize')
  @HttpCode(200)
  dataSize(@Body() body: unknown): Promise<DataSizeResult> {
    return this.sizing.dataSize(body as never);
  }

  @Post('statsForBalancing')
  @HttpCode(200)
  statsForBalancing(@Body() body: unknown): Promise<StatsForBalancingResult> {
    return this.sizing.statsForBalancing(body as never);
  }

  @Post('splitVector')
  @HttpCode(200)
  splitVector(@Body() body: unknown): Promise<SplitVectorResult> {
    return this.splitter.splitVector(body as never);
  }
}
