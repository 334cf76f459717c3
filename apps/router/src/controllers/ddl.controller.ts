import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { parseWith } from '@tessera/platform';
import { parseNamespace } from '../api/namespace.js';
import { renameCollectionBodySchema } from '../api/request-schemas.js';
import { CurrentOps } from '../operations/current-ops.service.js';
import { ClusterRoutingService } from '../routing/cluster-routing.service.js';

/** Collection DDL under `/v1/admin`, as MongoDB's admin commands. */
@Controller('v1/admin')
export class DdlController {
  constructor(
    private readonly cluster: ClusterRoutingService,
    private readonly ops: CurrentOps,
  ) {}

  /** MongoDB's renameCollection, for an unsharded collection within its database. */
  @Post('renameCollection')
  @HttpCode(200)
  renameCollection(@Body() body: unknown): Promise<{ ok: 1 }> {
    const request = parseWith(renameCollectionBodySchema, body, 'renameCollection request');
    const from = parseNamespace(request.renameCollection, 'renameCollection');
    const to = parseNamespace(request.to, 'to');
    return this.ops.run({ op: 'command', command: 'renameCollection', ns: from, body: request }, () =>
      this.cluster.renameCollection(from, to, request.dropTarget),
    );
  }
}
