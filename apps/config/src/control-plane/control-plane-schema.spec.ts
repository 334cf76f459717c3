import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { printControlPlaneSchema } from './control-plane-schema.js';

const committed = new URL('../../../../schema.graphql', import.meta.url);

describe('schema.graphql', () => {
  it('is the schema the code builds (after a change, run npm run schema:write and commit the file)', async () => {
    expect(await printControlPlaneSchema()).toBe(readFileSync(committed, 'utf8'));
  });
});
