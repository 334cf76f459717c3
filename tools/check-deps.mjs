#!/usr/bin/env node
// The dependency rule (ARCHITECTURE.md): apps -> adapter libs -> protocol -> core. Core is pure:
// it imports nothing but itself and `bson`, and reads no environment, clock or randomness. The k6
// workloads' shared modules (loadtests/lib) are pure too and import nothing but each other.
// bench/, tools/ and test/ may use any package and the apps' code, but reach a lib only through
// its index. Imports are read with the TypeScript parser, so an import spread over several lines,
// `export ... from`, `import type` and `import()` are all seen.
// Exits 1 listing every violation with file and line. Usage: node tools/check-deps.mjs [repo-root]
import { existsSync, readFileSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

function* tsFiles(dir) {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* tsFiles(path);
    else if ((name.endsWith('.ts') || name.endsWith('.mts') || name.endsWith('.tsx')) && !name.endsWith('.d.ts')) yield path;
  }
}

const corePurity = [
  [/process\.env/, 'reads process.env'],
  [/Date\.now\(/, 'reads the clock (Date.now)'],
  [/new Date\(\)/, 'reads the clock (new Date())'],
  [/Math\.random\(/, 'uses Math.random'],
  [/\brequire\(/, 'uses require'],
];

/** A relative import from bench/, tools/ or test/ into a lib may name only the lib's index. */
const intoLibInternals = (target) => /^libs\/[^/]+\//.test(target) && !/^libs\/[^/]+\/src\/index\.(js|ts)$/.test(target);
const noDeepLibImport = (spec) => !/^@tessera\/[^/]+\//.test(spec);

/** Which imports each area may make, besides relative files inside its home. */
const rules = [
  { area: 'libs/core/', allow: (spec) => spec === 'bson', pure: true },
  {
    area: 'libs/query/',
    allow: (spec) => spec === '@tessera/core' || spec === 'bson' || spec === 'mingo' || spec.startsWith('mingo/'),
    pure: true,
  },
  { area: 'libs/protocol/', allow: (spec) => spec === '@tessera/core' || spec === 'zod' || spec === 'undici' || spec.startsWith('node:') },
  { area: 'libs/routing/', allow: (spec) => spec === '@tessera/core' || spec === '@tessera/protocol' },
  { area: 'libs/platform/', allow: (spec) => !spec.startsWith('@tessera/platform') && !spec.startsWith('@tessera/migrations') },
  // The dashboard runs in the browser and knows the cluster only through the control plane's
  // GraphQL: no lib of the servers, no Node module. Its build configuration runs in Node.
  { area: 'apps/dashboard/vite.config.ts', allow: () => true, open: true },
  { area: 'apps/dashboard/', allow: (spec) => !spec.startsWith('@tessera/') && !spec.startsWith('node:') },
  { area: 'apps/', allow: noDeepLibImport },
  // The k6 workloads' shared logic runs in k6 and in Node: no k6 module, no Node module, and
  // randomness, time and the environment come in as arguments. The scripts may import k6's modules.
  { area: 'loadtests/lib/', allow: () => false, pure: true },
  { area: 'loadtests/', allow: (spec) => spec === 'k6' || spec.startsWith('k6/') },
  // Composition tools: any package, relative imports anywhere but into a lib's internals.
  { area: 'bench/', allow: noDeepLibImport, open: true },
  { area: 'tools/', allow: noDeepLibImport, open: true },
  { area: 'test/', allow: noDeepLibImport, open: true },
];

/** Every module specifier `file` imports or re-exports, with its 1-based line. */
function importsOf(file, text) {
  const source = ts.createSourceFile(
    file,
    text,
    ts.ScriptTarget.Latest,
    false,
    file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS,
  );
  const found = [];
  const add = (literal) =>
    found.push({ spec: literal.text, line: source.getLineAndCharacterOfPosition(literal.getStart(source)).line + 1 });
  const visit = (node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      add(node.moduleSpecifier);
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      add(node.moduleReference.expression);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [argument] = node.arguments;
      if (argument && ts.isStringLiteralLike(argument)) add(argument);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every violation of the rule in the tree at `root`, as `file:line: what`. */
export function checkDependencies(root) {
  const violations = [];
  for (const top of ['libs', 'apps', 'loadtests', 'bench', 'tools', 'test']) {
    for (const file of tsFiles(join(root, top))) {
      const rel = relative(root, file).split(sep).join('/');
      const rule = rules.find((r) => rel.startsWith(r.area));
      if (rule === undefined) continue;
      const isSpec = rel.endsWith('.spec.ts');
      const text = readFileSync(file, 'utf8');
      for (const { spec, line } of importsOf(file, text)) {
        const where = `${rel}:${line}`;
        if (spec.startsWith('.')) {
          const target = relative(root, join(file, '..', spec))
            .split(sep)
            .join('/');
          if (rule.open) {
            if (intoLibInternals(target)) violations.push(`${where}: relative import "${spec}" reaches into a lib (import its index)`);
            continue;
          }
          const home = rel.startsWith('apps/') ? rel.split('/').slice(0, 2).join('/') + '/' : rule.area;
          // Tests may share the fixtures under test/.
          const isFixture = isSpec && target.startsWith('test/');
          if (!target.startsWith(home) && !isFixture)
            violations.push(`${where}: relative import "${spec}" leaves ${home} (import through @tessera/* instead)`);
        } else if ((!isSpec || rule.open) && !rule.allow(spec)) {
          violations.push(`${where}: ${rule.area} may not import "${spec}"`);
        }
      }
      if (rule.pure && !isSpec) {
        text.split('\n').forEach((line, index) => {
          for (const [pattern, what] of corePurity)
            if (pattern.test(line)) violations.push(`${rel}:${index + 1}: ${rule.area} must stay pure but ${what}`);
        });
      }
    }
  }
  return violations;
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
  const violations = checkDependencies(root);
  if (violations.length > 0) {
    console.error(`dependency rule: ${violations.length} violation(s)\n${violations.map((v) => `  ${v}`).join('\n')}`);
    process.exit(1);
  }
  console.log(
    'dependency rule: ok (core pure; apps -> platform -> protocol -> core; no deep imports; loadtests/lib pure; bench, tools and test reach libs through their index)',
  );
}
