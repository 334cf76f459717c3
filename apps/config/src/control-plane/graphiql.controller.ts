import { createReadStream } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Controller, Get, Header, Param, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { TesseraError } from '@tessera/core';
import { GRAPHQL_PATH } from './graphql-options.js';

const require = createRequire(import.meta.url);
const packageDir = (name: string) => dirname(require.resolve(`${name}/package.json`));

/** The only files served: GraphiQL's browser bundle and the React it runs on, from node_modules. */
const ASSETS: Record<string, { file: () => string; type: string }> = {
  'react.js': { file: () => join(packageDir('react'), 'umd', 'react.production.min.js'), type: 'text/javascript' },
  'react-dom.js': { file: () => join(packageDir('react-dom'), 'umd', 'react-dom.production.min.js'), type: 'text/javascript' },
  'graphiql.js': { file: () => join(packageDir('graphiql'), 'graphiql.min.js'), type: 'text/javascript' },
  'graphiql.css': { file: () => join(packageDir('graphiql'), 'graphiql.min.css'), type: 'text/css' },
};

const PAGE = `<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>Tessera control plane</title>
    <style>body { margin: 0; } #graphiql { height: 100vh; }</style>
    <link rel="stylesheet" href="/graphiql/assets/graphiql.css" />
    <script src="/graphiql/assets/react.js"></script>
    <script src="/graphiql/assets/react-dom.js"></script>
    <script src="/graphiql/assets/graphiql.js"></script>
  </head>
  <body>
    <div id="graphiql">Loading...</div>
    <script>
      // Put {"Authorization": "Bearer <viewer or admin token>"} in the Headers tab; subscriptions
      // send the same token from the page's URL: /graphiql#token=<token>.
      const token = new URLSearchParams(location.hash.slice(1)).get('token');
      const fetcher = GraphiQL.createFetcher({
        url: '${GRAPHQL_PATH}',
        subscriptionUrl: location.origin.replace(/^http/, 'ws') + '${GRAPHQL_PATH}',
        wsConnectionParams: token ? { authorization: 'Bearer ' + token } : {},
        headers: token ? { authorization: 'Bearer ' + token } : {},
      });
      ReactDOM.createRoot(document.getElementById('graphiql')).render(
        React.createElement(GraphiQL, { fetcher, defaultEditorToolsVisibility: true, isHeadersEditorEnabled: true }),
      );
    </script>
  </body>
</html>
`;

/**
 * GraphiQL for development (`TESSERA_GRAPHQL_DEVELOPMENT`), served entirely from this process:
 * no CDN, so it works offline. Registered only in development mode.
 */
@Controller('graphiql')
export class GraphiqlController {
  @Get()
  @Header('content-type', 'text/html; charset=utf-8')
  page(): string {
    return PAGE;
  }

  @Get('assets/:name')
  asset(@Param('name') name: string, @Res() reply: FastifyReply): void {
    const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
    if (asset === undefined) throw new TesseraError('NOT_FOUND', `no GraphiQL asset named "${name}"`);
    void reply.header('content-type', asset.type).header('cache-control', 'public, max-age=86400').send(createReadStream(asset.file()));
  }
}
