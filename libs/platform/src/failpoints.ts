import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER, SETTINGS } from './tokens.js';

/**
 * Test-only pauses at named points, as MongoDB's failpoints: `TESSERA_FAILPOINTS` is a comma
 * list of `name=milliseconds`, e.g. `ddl.shardCollection.commit=30000`, or `name@resource=ms` to
 * pause only for one namespace, so a fault test can kill a process while it is known to be
 * inside a phase. Empty in production. Config servers pause in DDL phases, shards in migration
 * phases and the range deleter (their READMEs list the names).
 */
@Injectable()
export class Failpoints {
  private readonly pauses: Map<string, number>;

  constructor(
    @Inject(SETTINGS) settings: { TESSERA_FAILPOINTS: string },
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.pauses = parseFailpoints(settings.TESSERA_FAILPOINTS);
  }

  async pauseAt(name: string, resource?: string): Promise<void> {
    const ms = this.valueOf(name, resource);
    if (ms === undefined) return;
    this.logger.warn({ failpoint: name, resource, ms }, `failpoint ${name}: pausing ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, ms));
  }

  /**
   * Whether a switch failpoint is on (`name=1`): a test turning a mechanism off to show that
   * its checker catches what the mechanism prevents.
   */
  isOn(name: string, resource?: string): boolean {
    return this.valueOf(name, resource) !== undefined;
  }

  private valueOf(name: string, resource: string | undefined): number | undefined {
    // The one set for this resource first: a test may pause one transaction longer than the rest.
    return (resource === undefined ? undefined : this.pauses.get(`${name}@${resource}`)) ?? this.pauses.get(name);
  }
}

export function parseFailpoints(text: string): Map<string, number> {
  const pauses = new Map<string, number>();
  for (const entry of text
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const [name, ms] = entry.split('=');
    if (name && ms && Number.isInteger(Number(ms))) pauses.set(name, Number(ms));
  }
  return pauses;
}
