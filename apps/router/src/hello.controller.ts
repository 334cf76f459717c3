import { Controller, Get } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import { HealthService } from '@tessera/platform';

/**
 * MongoDB's `hello` as a router answers it: `msg: "isdbgrid"` tells a client it talks to mongos;
 * `topologyVersion` changes when the router enters quiesce mode before a shutdown, and from then
 * on `hello` answers ShutdownInProgress (with `isWritablePrimary: false`) while operations still
 * run: the client's signal to send its operations to another router.
 */
@Controller('v1/hello')
export class HelloController {
  constructor(private readonly health: HealthService) {}

  @Get()
  hello(): Record<string, unknown> {
    const topologyVersion = this.health.topologyVersion;
    const remainingQuiesceMs = this.health.quiesceRemainingMs();
    if (remainingQuiesceMs !== undefined) {
      throw new TesseraError('SHUTDOWN_IN_PROGRESS', 'the router is quiescing before it shuts down: send operations to another router', {
        details: { isWritablePrimary: false, topologyVersion, remainingQuiesceMs },
      });
    }
    return {
      isWritablePrimary: true,
      msg: 'isdbgrid',
      topologyVersion,
      maxBsonObjectSize: 16 * 1024 * 1024,
      maxMessageSizeBytes: 48_000_000,
      maxWriteBatchSize: 100_000,
      localTime: new Date().toISOString(),
      ok: 1,
    };
  }
}
