/**
 * `/v1/docs`: the OpenAPI document rendered as one self-contained HTML page (no scripts, no
 * CDN, works offline). Each operation shows its summary, parameters and request and response
 * schemas as JSON.
 */

interface OperationObject {
  summary?: string;
  description?: string;
  parameters?: Array<{ name: string; description?: string }>;
  requestBody?: { content: Record<string, { schema: unknown }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: unknown }> }>;
}

export function renderDocsPage(document: Record<string, unknown>): string {
  const info = document['info'] as { title: string; description: string };
  const paths = document['paths'] as Record<string, Record<string, OperationObject>>;
  const schemas = (document['components'] as { schemas: Record<string, unknown> }).schemas;
  const sections = Object.entries(paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => {
      const parameters = (op.parameters ?? [])
        .map((p) => `<li><code>${escape(p.name)}</code> ${escape(p.description ?? '')}</li>`)
        .join('');
      const request = op.requestBody ? Object.values(op.requestBody.content)[0]?.schema : undefined;
      const responses = Object.entries(op.responses)
        .map(
          ([status, r]) =>
            `<h4>${escape(status)} — ${escape(r.description)}</h4>${r.content ? json(Object.values(r.content)[0]?.schema) : ''}`,
        )
        .join('');
      return `<section id="${escape(method + path)}"><h3><span class="m ${method}">${method.toUpperCase()}</span> <code>${escape(path)}</code></h3>
<p>${escape(op.summary ?? '')}</p>${op.description ? `<p>${escape(op.description)}</p>` : ''}
${parameters ? `<h4>Path parameters</h4><ul>${parameters}</ul>` : ''}
${request !== undefined ? `<h4>Request body</h4>${json(request)}` : ''}${responses}</section>`;
    }),
  );
  const toc = Object.entries(paths)
    .flatMap(([path, methods]) =>
      Object.keys(methods).map((m) => `<li><a href="#${escape(m + path)}">${m.toUpperCase()} ${escape(path)}</a></li>`),
    )
    .join('');
  const components = Object.entries(schemas)
    .map(([name, schema]) => `<h4 id="${escape(name)}">${escape(name)}</h4>${json(schema)}`)
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(info.title)}</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
code,pre{font:13px ui-monospace,monospace}pre{background:#f5f5f5;padding:.6em;overflow:auto;border-radius:4px}
section{border-top:1px solid #ddd;padding-top:.5em}.m{color:#fff;padding:.1em .4em;border-radius:3px;font-size:13px}
.get{background:#2b7}.post{background:#27c}.put{background:#c82}.patch{background:#a6c}.delete{background:#c33}
</style></head><body>
<h1>${escape(info.title)}</h1><p>${escape(info.description)}</p><p>Machine-readable: <a href="/v1/openapi.json">/v1/openapi.json</a></p>
<h2>Routes</h2><ul>${toc}</ul>${sections.join('\n')}<h2>Schemas</h2>${components}
</body></html>`;
}

function json(value: unknown): string {
  return `<pre>${escape(JSON.stringify(value, null, 2))}</pre>`;
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}
