import { Controller, Get, Header } from '@nestjs/common';
import { renderDocsPage } from '../openapi/docs-page.js';
import { buildOpenApiDocument } from '../openapi/openapi-document.js';

/** The API's description: the OpenAPI document and a self-contained HTML page of it. */
@Controller('v1')
export class OpenApiController {
  private readonly document = buildOpenApiDocument();
  private readonly page = renderDocsPage(this.document);

  @Get('openapi.json')
  openapi(): Record<string, unknown> {
    return this.document;
  }

  @Get('docs')
  @Header('content-type', 'text/html; charset=utf-8')
  docs(): string {
    return this.page;
  }
}
