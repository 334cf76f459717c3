import { Controller, Get } from '@nestjs/common';

/** MongoDB's `hello` as a router answers it: `msg: "isdbgrid"` tells a client it talks to mongos. */
@Controller('v1/hello')
export class HelloController {
  @Get()
  hello(): Record<string, unknown> {
    return {
      isWritablePrimary: true,
      msg: 'isdbgrid',
      maxBsonObjectSize: 16 * 1024 * 1024,
      maxMessageSizeBytes: 48_000_000,
      maxWriteBatchSize: 100_000,
      localTime: new Date().toISOString(),
      ok: 1,
    };
  }
}
