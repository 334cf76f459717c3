#!/usr/bin/env node
// The dependency rule (ARCHITECTURE.md): apps -> adapter libs -> protocol -> core. Core is pure:
// it imports nothing but itself and `bson`, and reads no environment, clock or randomness. The k6
// workloads' shared modules (loadtests/lib) are pure too and import nothing but each other.
// Exits 1 listing every violation with file and line. Usage: node tools/check-deps.mjs [repo-root]
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const root = process.argv[2] ?? new URL('..', import.meta.url).pathname;

function* tsFiles(dir) {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* tsFiles(path);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) yield path;
  }
}

const importPattern = /(?:^|[\s;])(?:import|export)\s(?:[^'";]*?\sfrom\s)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
const corePurity = [
  [/process\.env/, 'reads process.env'],
  [/Date\.now\(/, 'reads the clock (Date.now)'],
  [/new Date\(\)/, 'reads the clock (new Date())'],
  [/Math\.random\(/, 'uses Math.random'],
  [/\brequire\(/, 'uses require'],
];

/** Which imports each area may make, besides relative files inside itself. */
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
  { area: 'apps/', allow: (spec) => !/^@tessera\/[^/]+\//.test(spec) },
  // The k6 workloads' shared logic runs in k6 and in Node: no k6 module, no Node module, and
  // randomness, time and the environment come in as arguments. The scripts may import k6's modules.
  { area: 'loadtests/lib/', allow: () => false, pure: true },
  { area: 'loadtests/', allow: (spec) => spec === 'k6' || spec.startsWith('k6/') },
];

const violations = [];
for (const top of ['libs', 'apps', 'loadtests']) {
  for (const file of tsFiles(join(root, top))) {
    const rel = relative(root, file).split(sep).join('/');
    const rule = rules.find((r) => rel.startsWith(r.area));
    if (rule === undefined) continue;
    const isSpec = rel.endsWith('.spec.ts');
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, index) => {
      const where = `${rel}:${index + 1}`;
      for (const match of line.matchAll(importPattern)) {
        const spec = match[1] ?? match[2];
        if (spec.startsWith('.')) {
          const target = relative(root, join(file, '..', spec))
            .split(sep)
            .join('/');
          const home = rel.startsWith('apps/') ? rel.split('/').slice(0, 2).join('/') + '/' : rule.area;
          // Tests may share the fixtures under test/.
          const isFixture = isSpec && target.startsWith('test/');
          if (!target.startsWith(home) && !isFixture)
            violations.push(`${where}: relative import "${spec}" leaves ${home} (import through @tessera/* instead)`);
        } else if (!isSpec && !rule.allow(spec)) {
          violations.push(`${where}: ${rule.area} may not import "${spec}"`);
        }
      }
      if (rule.pure && !isSpec) {
        for (const [pattern, what] of corePurity)
          if (pattern.test(line)) violations.push(`${where}: ${rule.area} must stay pure but ${what}`);
      }
    });
  }
}

if (violations.length > 0) {
  console.error(`dependency rule: ${violations.length} violation(s)\n${violations.map((v) => `  ${v}`).join('\n')}`);
  process.exit(1);
}
console.log('dependency rule: ok (core pure; apps -> platform -> protocol -> core; no deep imports; loadtests/lib pure)');
