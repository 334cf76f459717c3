import { Body, Controller, Get, Header, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { CloneCatalogDataStatus, CloneSource, SessionHistoryBatch } from '@tessera/protocol';
import { DatabaseCriticalSections } from './database-critical-sections.service.js';
import { MovePrimaryDonor } from './move-primary-donor.service.js';
import { MovePrimaryRecipient } from './move-primary-recipient.service.js';

/** movePrimary's shard commands, which the config server's MovePrimaryCoordinator sends, and the donor's clone routes the recipient reads. */
@Controller('internal')
@UseGuards(ClusterAuthGuard)
export class DatabasesController {
  constructor(
    private readonly sections: DatabaseCriticalSections,
    private readonly donor: MovePrimaryDonor,
    private readonly recipient: MovePrimaryRecipient,
  ) {}

  @Post('databases/:db/enterCriticalSection')
  @HttpCode(200)
  enterCriticalSection(@Param('db') db: string, @Body() body: unknown): Promise<{ ok: 1 }> {
    return this.sections.enter(db, body);
  }

  @Post('databases/:db/exitCriticalSection')
  @HttpCode(200)
  exitCriticalSection(@Param('db') db: string, @Body() body: unknown): Promise<{ ok: 1 }> {
    return this.sections.exit(db, body);
  }

  @Post('databases/:db/cloneCatalogData')
  @HttpCode(200)
  cloneCatalogData(@Param('db') db: string, @Body() body: unknown): Promise<CloneCatalogDataStatus> {
    return this.recipient.cloneCatalogData(db, body);
  }

  @Post('databases/:db/dropStaleData')
  @HttpCode(200)
  dropStaleData(@Param('db') db: string, @Body() body: unknown): Promise<{ dropped: number }> {
    return this.donor.dropStaleData(db, body);
  }

  @Get('namespaces/:ns/cloneSource')
  cloneSource(@Param('ns') ns: string): Promise<CloneSource> {
    return this.donor.cloneSource(ns);
  }

  @Post('namespaces/:ns/sessionHistory')
  @HttpCode(200)
  sessionHistory(@Param('ns') ns: string, @Body() body: unknown): Promise<SessionHistoryBatch> {
    return this.donor.sessionHistory(ns, body);
  }

  @Post('namespaces/:ns/cloneRows')
  @HttpCode(200)
  @Header('content-type', 'text/plain; charset=utf-8')
  cloneRows(@Param('ns') ns: string, @Body() body: unknown): Promise<string> {
    return this.donor.cloneRows(ns, body);
  }
}
