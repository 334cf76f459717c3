import 'reflect-metadata';
import { Body, Controller, Get, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import Fastify from 'fastify';

/** The server side of bench:http: one process per platform, so each gets a core to itself. */
@Controller()
class PingController {
  @Get('ping')
  ping(): { ok: number } {
    return { ok: 1 };
  }

  @Post('echo')
  echo(@Body() body: unknown): unknown {
    return body;
  }
}

@Module({ controllers: [PingController] })
class BenchModule {}

const [platform = 'fastify', portText = '0'] = process.argv.slice(2);
const port = Number(portText);

if (platform === 'bare-fastify') {
  const app = Fastify();
  app.get('/ping', async () => ({ ok: 1 }));
  app.post('/echo', async (request) => request.body);
  await app.listen({ port, host: '127.0.0.1' });
} else {
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = await NestFactory.create(BenchModule, adapter, { logger: false });
  await app.listen(port, '127.0.0.1');
}
process.send?.('listening');
