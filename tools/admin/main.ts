import { parseArgs } from 'node:util';
import { Agent } from 'undici';
import { TesseraError } from '@tessera/core';
import { ConfigClient } from '@tessera/protocol';

const USAGE = `Usage: node dist/tools/admin/main.js <command> [options]

Administrative commands against a config server, signed with the cluster key.
Environment: TESSERA_CONFIG_URL (default http://127.0.0.1:7080), TESSERA_CLUSTER_KEY (required).

Commands:
  add-shard --name NAME --url URL [--retry-for SECONDS]   add a shard (idempotent); retries while it does not answer
  list-shards                                             print the shard registry as JSON
  list-routers                                            print the registered routers as JSON
  ddl COMMAND 'JSON'                                      run a DDL command on the leader, e.g.
      ddl shardCollection '{"ns":"shop.orders","key":{"customer":1}}'
      (enableSharding, shardCollection, refineCollectionShardKey, dropCollection, dropDatabase,
       movePrimary, removeShard, addShardToZone, removeShardFromZone, updateZoneKeyRange)
  leader                                                  print which config process leads`;

function fail(message: string, code = 2): never {
  process.stderr.write(`tessera-admin: ${message}\n`);
  if (code === 2) process.stderr.write(`\n${USAGE}\n`);
  process.exit(code);
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { name: { type: 'string' }, url: { type: 'string' }, 'retry-for': { type: 'string' } },
});
const key = process.env.TESSERA_CLUSTER_KEY;
if (key === undefined || key === '') fail('TESSERA_CLUSTER_KEY is not set');
const agent = new Agent();
const config = new ConfigClient(process.env.TESSERA_CONFIG_URL ?? 'http://127.0.0.1:7080', { clusterKey: key, dispatcher: agent });
const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

try {
  switch (positionals[0]) {
    case 'add-shard': {
      if (values.name === undefined || values.url === undefined) fail('add-shard needs --name and --url');
      const deadline = Date.now() + Number(values['retry-for'] ?? 0) * 1000;
      for (;;) {
        try {
          print(await config.addShard({ name: values.name, url: values.url }));
          break;
        } catch (error) {
          if (!(error instanceof TesseraError && error.retryable && Date.now() < deadline)) throw error;
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
      break;
    }
    case 'list-shards':
      print(await config.listShards());
      break;
    case 'list-routers':
      print(await config.listRouters());
      break;
    case 'leader':
      print(await config.leader());
      break;
    case 'ddl': {
      const [, command, json] = positionals;
      const commands = [
        'enableSharding',
        'shardCollection',
        'refineCollectionShardKey',
        'dropCollection',
        'dropDatabase',
        'movePrimary',
        'removeShard',
        'addShardToZone',
        'removeShardFromZone',
        'updateZoneKeyRange',
      ] as const;
      const name = commands.find((c) => c === command);
      if (name === undefined) fail(`unknown DDL command "${command ?? ''}"`);
      let request: unknown;
      try {
        request = JSON.parse(json ?? '');
      } catch {
        fail(`the request must be JSON, got ${json === undefined ? 'nothing' : `"${json}"`}`);
      }
      print(await (config[name] as (r: unknown) => Promise<unknown>).call(config, request));
      break;
    }
    default:
      fail(positionals[0] === undefined ? 'no command given' : `unknown command "${positionals[0]}"`);
  }
} catch (error) {
  fail(error instanceof TesseraError ? `${error.code}: ${error.message}` : String(error), 1);
} finally {
  await agent.close();
}
