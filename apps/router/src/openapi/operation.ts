import type { z } from 'zod';

export type JsonSchema = Record<string, unknown>;

/** One route of the public API as the OpenAPI document describes it. */
export interface Operation {
  readonly method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  readonly path: string;
  readonly summary: string;
  readonly description?: string;
  readonly body?: z.ZodType;
  readonly response: JsonSchema;
  readonly tag: string;
}

export const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
export const ok = { type: 'integer', const: 1 };

export function obj(properties: Record<string, JsonSchema>, required = Object.keys(properties)): JsonSchema {
  return { type: 'object', properties, required };
}
