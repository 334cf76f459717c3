import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { printControlPlaneSchema } from '../apps/config/src/control-plane/control-plane-schema.js';

// Writes the control plane's GraphQL schema to schema.graphql at the repository root, where a
// test compares it with what the code builds. Run after changing a resolver or a GraphQL type.
const target = new URL('../../schema.graphql', import.meta.url);
writeFileSync(target, await printControlPlaneSchema());
process.stdout.write(`wrote ${target.pathname}\n`);
