import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER, SETTINGS, raceTimeLimit, timeLimitOf } from '@tessera/platform';
import { ForegroundLoadService } from '../load/foreground-load.service.js';
import type { RouterSettings } from '../router.settings.js';

const WRITE_COMMANDS = new Set(['insert', 'update', 'delete', 'findAndModify', 'bulkWrite']);

/** Whether the operation writes: what the balancer's throttle watches (`ForegroundLoadService`). */
function isWrite(info: OperationInfo): boolean {
  return WRITE_COMMANDS.has(info.command);
}

/** What an operation is, as MongoDB's currentOp and slow-query log name it. */
export interface OperationInfo {
  /** currentOp's `op`: insert, update, remove, query, getmore or command. */
  readonly op: 'insert' | 'update' | 'remove' | 'query' | 'getmore' | 'command';
  /** The command's name: find, update, aggregate, ... */
  readonly command: string;
  readonly ns: string;
  /** The request's body: its `comment`, `maxTimeMS` and `lsid` are kept. */
  readonly body?: { comment?: unknown; maxTimeMS?: number | undefined; lsid?: unknown } | undefined;
}

interface InProgress {
  readonly opid: number;
  readonly info: OperationInfo;
  readonly started: bigint;
}

/** An entry of `currentOp`'s `inprog`, in MongoDB's shape. */
export interface CurrentOpEntry {
  opid: number;
  active: true;
  op: OperationInfo['op'];
  ns: string;
  command: Record<string, unknown>;
  secs_running: number;
  microsecs_running: number;
  lsid?: unknown;
}

/**
 * The router's operations in progress (MongoDB's `currentOp`), each with its command's
 * `comment`, and the slow-operation log (MongoDB's slowms): an operation that took
 * `TESSERA_SLOW_OP_MS` or longer is logged with its comment and duration. An operation's
 * `maxTimeMS` is enforced here: past it the operation answers MaxTimeMSExpired; the shards it
 * reached stop too, their commands carrying the time left (`ResolvedRead.limit`).
 */
@Injectable()
export class CurrentOps {
  private nextOpid = 1;
  private readonly inProgress = new Map<number, InProgress>();

  constructor(
    @Inject(SETTINGS) private readonly settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly load: ForegroundLoadService,
  ) {}

  async run<T>(info: OperationInfo, work: () => Promise<T>): Promise<T> {
    const operation: InProgress = { opid: this.nextOpid++, info, started: process.hrtime.bigint() };
    this.inProgress.set(operation.opid, operation);
    if (isWrite(info)) this.load.writeStarted();
    let failed: unknown;
    try {
      return await raceTimeLimit(timeLimitOf(info.body?.maxTimeMS), work);
    } catch (error) {
      failed = error;
      throw error;
    } finally {
      this.inProgress.delete(operation.opid);
      if (isWrite(info)) this.load.recordWrite(Number(process.hrtime.bigint() - operation.started) / 1e6);
      this.logIfSlow(operation, failed);
    }
  }

  /** The operations in progress, oldest first. */
  list(): CurrentOpEntry[] {
    const now = process.hrtime.bigint();
    return [...this.inProgress.values()].map(({ opid, info, started }) => {
      const micros = Number((now - started) / 1000n);
      return {
        opid,
        active: true,
        op: info.op,
        ns: info.ns,
        command: commandOf(info),
        secs_running: Math.floor(micros / 1_000_000),
        microsecs_running: micros,
        ...(info.body?.lsid !== undefined ? { lsid: info.body.lsid } : {}),
      };
    });
  }

  private logIfSlow({ opid, info, started }: InProgress, failed: unknown): void {
    const durationMillis = Number((process.hrtime.bigint() - started) / 1_000_000n);
    if (durationMillis < this.settings.TESSERA_SLOW_OP_MS) return;
    this.logger.info(
      {
        opid,
        ns: info.ns,
        command: commandOf(info),
        durationMillis,
        ...(failed !== undefined ? { error: (failed as { code?: unknown }).code ?? String(failed) } : {}),
      },
      'Slow query',
    );
  }
}

/** The command as currentOp shows it: its name and collection, and the options kept. */
function commandOf({ command, ns, body }: OperationInfo): Record<string, unknown> {
  return {
    [command]: ns.slice(ns.indexOf('.') + 1),
    $db: ns.slice(0, ns.indexOf('.')),
    ...(body?.comment !== undefined ? { comment: body.comment } : {}),
    ...(body?.maxTimeMS !== undefined ? { maxTimeMS: body.maxTimeMS } : {}),
  };
}
