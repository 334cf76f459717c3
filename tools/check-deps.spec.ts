import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module without types, run by npm run check:deps.
import { checkDependencies } from './check-deps.mjs';

const script = new URL('./check-deps.mjs', import.meta.url).pathname;
const trees: string[] = [];

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-deps-'));
  trees.push(dir);
  mkdirSync(join(dir, 'apps'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** The check on a tree of `files`, as the script reports it (status 1 with the violations listed). */
function checkTree(files: Record<string, string>): { status: number; output: string } {
  const violations = (checkDependencies as (root: string) => string[])(tree(files));
  return { status: violations.length > 0 ? 1 : 0, output: violations.join('\n') };
}

afterEach(() => {
  for (const tree of trees.splice(0)) rmSync(tree, { recursive: true, force: true });
});

describe('the dependency rule check', () => {
  it('accepts a pure core that imports itself and bson', () => {
    const result = checkTree({
      'libs/core/src/a.ts': "import { b } from './b.js';\nimport { EJSON } from 'bson';\n",
      'libs/core/src/b.ts': 'export const b = 1;\n',
    });
    expect(result.status).toBe(0);
  });

  it.each([
    ["import { Injectable } from '@nestjs/common';", 'may not import "@nestjs/common"'],
    ["import { DataSource } from 'typeorm';", 'may not import "typeorm"'],
    ["import { readFileSync } from 'node:fs';", 'may not import "node:fs"'],
    ['export const port = process.env.PORT;', 'reads process.env'],
    ['export const now = () => Date.now();', 'reads the clock'],
    ['export const roll = () => Math.random();', 'uses Math.random'],
  ])('refuses core code with %s', (line, message) => {
    const result = checkTree({ 'libs/core/src/bad.ts': `${line}\n` });
    expect(result.status).toBe(1);
    expect(result.output).toContain('libs/core/src/bad.ts:1');
    expect(result.output).toContain(message);
  });

  it("keeps the k6 workloads' shared modules free of k6, Node and ambient randomness, and lets the scripts import k6", () => {
    expect(
      checkTree({
        'loadtests/lib/keys.ts': "import { buildDocument } from './documents.ts';\n",
        'loadtests/lib/documents.ts': 'export const buildDocument = 1;\n',
        'loadtests/insert.ts':
          "import http from 'k6/http';\nimport exec from 'k6/execution';\nimport { buildDocument } from './lib/keys.ts';\n",
      }).status,
    ).toBe(0);
    for (const [line, message] of [
      ["import http from 'k6/http';", 'loadtests/lib/ may not import "k6/http"'],
      ["import { readFileSync } from 'node:fs';", 'loadtests/lib/ may not import "node:fs"'],
      ['export const roll = () => Math.random();', 'uses Math.random'],
      ["import { send } from '../support/k6-driver.ts';", 'leaves loadtests/lib/'],
    ]) {
      const result = checkTree({ 'loadtests/lib/bad.ts': `${line}\n` });
      expect(result.status).toBe(1);
      expect(result.output).toContain(message);
    }
    expect(checkTree({ 'loadtests/bad.ts': "import pg from 'pg';\n" }).output).toContain('loadtests/ may not import "pg"');
  });

  it('refuses a router that reaches into the config server by relative path', () => {
    const result = checkTree({ 'apps/router/src/a.ts': "import { x } from '../../config/src/x.js';\n" });
    expect(result.status).toBe(1);
    expect(result.output).toContain('leaves apps/router/');
  });

  it('keeps the dashboard a browser app: no server lib, no Node module, not even from a .tsx file', () => {
    const result = checkTree({
      'apps/dashboard/src/a.tsx': "import { x } from '@tessera/core';\nexport const A = () => <p>{x}</p>;\n",
      'apps/dashboard/src/b.ts': "import { readFileSync } from 'node:fs';\n",
      'apps/dashboard/src/c.ts': "import { createClient } from 'graphql-ws';\n",
      'apps/dashboard/vite.config.ts': "import { fileURLToPath } from 'node:url';\n",
    });
    expect(result.output.split('\n')).toEqual([
      'apps/dashboard/src/a.tsx:1: apps/dashboard/ may not import "@tessera/core"',
      'apps/dashboard/src/b.ts:1: apps/dashboard/ may not import "node:fs"',
    ]);
  });

  it('lets a spec use the shared test fixtures, but not production code', () => {
    const fixture = "import { createTestDatabase } from '../../../../test/pg/test-database.js';\n";
    expect(checkTree({ 'apps/config/src/locks/a.pg.spec.ts': fixture }).status).toBe(0);
    const result = checkTree({ 'apps/config/src/locks/a.ts': fixture });
    expect(result.status).toBe(1);
    expect(result.output).toContain('leaves apps/config/');
  });

  it.each([
    ['an import over several lines', "import {\n  Injectable,\n  Module,\n} from '@nestjs/common';\n", 4, '@nestjs/common'],
    ['a re-export', "export {\n  DataSource,\n} from 'typeorm';\n", 3, 'typeorm'],
    ['a type-only import', "import type {\n  Pool } from 'pg';\n", 2, 'pg'],
    ['a dynamic import', "export const load = () =>\n  import(\n    'pg'\n  );\n", 3, 'pg'],
    ['an import type', "export type P = import('pg').Pool;\n", 1, 'pg'],
  ])('finds a layering violation hidden in %s, on the line of its module', (_what, text, line, module) => {
    const result = checkTree({ 'libs/core/src/hidden.ts': text });
    expect(result.status).toBe(1);
    expect(result.output).toContain(`libs/core/src/hidden.ts:${line}: libs/core/ may not import "${module}"`);
  });

  it('lets bench, tools and test use any package and the apps, but reach a lib only through its index', () => {
    expect(
      checkTree({
        'bench/a.bench.ts':
          "import pg from 'pg';\nimport { x } from '../libs/core/src/index.js';\nimport { y } from '../apps/config/src/y.js';\n",
        'tools/b.ts': "import { z } from '@tessera/protocol';\n",
        'test/c.ts': "import { w } from '../tools/cluster/local-cluster.js';\n",
      }).status,
    ).toBe(0);
    const inside = checkTree({ 'bench/a.bench.ts': "import {\n  encodeKey,\n} from '../libs/core/src/keys/encoding.js';\n" });
    expect(inside.status).toBe(1);
    expect(inside.output).toContain('bench/a.bench.ts:3: relative import "../libs/core/src/keys/encoding.js" reaches into a lib');
    const deep = checkTree({ 'test/e2e/a.e2e.spec.ts': "import { x } from '@tessera/core/src/x.js';\n" });
    expect(deep.status).toBe(1);
    expect(deep.output).toContain('test/ may not import "@tessera/core/src/x.js"');
  });

  it('runs as a script that exits 1 listing the violations, and 0 on a clean tree', () => {
    const bad = spawnSync(process.execPath, [script, tree({ 'libs/core/src/a.ts': "import {\n  x,\n} from 'pg';\n" })], {
      encoding: 'utf8',
    });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('libs/core/src/a.ts:3: libs/core/ may not import "pg"');
    const good = spawnSync(process.execPath, [script, tree({ 'libs/core/src/a.ts': 'export const a = 1;\n' })], { encoding: 'utf8' });
    expect(good.status).toBe(0);
  });

  it('refuses deep imports into a lib', () => {
    const result = checkTree({ 'apps/shard/src/a.ts': "import { x } from '@tessera/core/src/x.js';\n" });
    expect(result.status).toBe(1);
    expect(result.output).toContain('apps/shard/src/a.ts:1: apps/ may not import "@tessera/core/src/x.js"');
  });
});
