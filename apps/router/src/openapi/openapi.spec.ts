import SwaggerParser from '@apidevtools/swagger-parser';
import { PATH_METADATA, METHOD_METADATA } from '@nestjs/common/constants.js';
import { RequestMethod } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { collectionHotRoutes } from '../controllers/collection.routes.js';
import type { CurrentOps } from '../operations/current-ops.service.js';
import type { QueryService } from '../reads/query.service.js';
import { ROUTER_CONTROLLERS } from '../router.module.js';
import type { WriteService } from '../writes/write.service.js';
import { renderDocsPage } from './docs-page.js';
import { buildOpenApiDocument, describedRoutes } from './openapi-document.js';

/** `METHOD /path/{param}` for every handler of the router's controllers, read from Nest's metadata, and every hot route. */
function registeredRoutes(): string[] {
  const hot = collectionHotRoutes({} as WriteService, {} as QueryService, {} as CurrentOps);
  const routes = hot.map((route) => `POST ${route.url.replace(/:(\w+)/g, '{$1}')}`);
  for (const controller of ROUTER_CONTROLLERS) {
    const base = String(Reflect.getMetadata(PATH_METADATA, controller) ?? '');
    for (const name of Object.getOwnPropertyNames(controller.prototype)) {
      const handler = (controller.prototype as unknown as Record<string, unknown>)[name];
      if (name === 'constructor' || typeof handler !== 'function') continue;
      const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
      if (method === undefined) continue;
      const sub = String(Reflect.getMetadata(PATH_METADATA, handler) ?? '');
      const path = `/${[base, sub].filter((p) => p !== '' && p !== '/').join('/')}`.replace(/:(\w+)/g, '{$1}');
      routes.push(`${RequestMethod[method]} ${path}`);
    }
  }
  return routes.sort();
}

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const document = buildOpenApiDocument();
    await expect(SwaggerParser.validate(structuredClone(document) as never)).resolves.toBeDefined();
    expect(document['openapi']).toBe('3.1.0');
  });

  it('describes every route the controllers register, and nothing else', () => {
    expect(registeredRoutes().length).toBeGreaterThan(10);
    expect(describedRoutes().sort()).toEqual(registeredRoutes());
  });

  it('renders as one HTML page with no external script or stylesheet', () => {
    const page = renderDocsPage(buildOpenApiDocument());
    expect(page).toContain('/v1/{db}/{coll}/insert');
    expect(page).not.toMatch(/<script|<link|https?:\/\/(?!json-schema)/);
  });
});
