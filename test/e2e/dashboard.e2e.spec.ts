import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { type Browser, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { repoRoot, rootApi, startTestCluster } from './test-cluster.js';

const ADMIN = 'admin-token-for-the-dashboard-test';
const VIEWER = 'viewer-token-for-the-dashboard-test';
const NS = 'dash.events';
const SHOTS = join(repoRoot, 'test-results');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const pad = 'p'.repeat(400);

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let api: RouterApi;
let browser: Browser;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 1,
    configs: 2,
    env: { ...FAST_CONFIG_ENV, TESSERA_ADMIN_TOKEN: ADMIN, TESSERA_VIEWER_TOKEN: VIEWER, TESSERA_LOG_LEVEL: 'warn' },
  }));
  await waitForLeader(cluster.configClient());
  api = rootApi(cluster);
  // The balancer stays off: the moves this file sees are the ones it makes.
  await graphql('mutation { setBalancerState(enabled: false) { mode } }');
  await graphql('mutation($input: ShardCollectionInput!) { shardCollection(input: $input) { ns } }', { input: { ns: NS, key: { x: 1 } } });
  await graphql('mutation { configureCollectionBalancing(ns: "dash.events", chunkSizeBytes: 65536) { ns } }');
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
  });
});

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await dispose?.();
});

/** A control-plane operation with the admin token on config process `node`; throws on errors. */
async function graphql<T = Record<string, unknown>>(
  query: string,
  variables: Record<string, unknown> = {},
  node = 'config',
  token = ADMIN,
): Promise<T> {
  const response = await fetch(`${cluster.node(node).url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const answer = (await response.json()) as { data?: T; errors?: Array<{ message: string }> };
  if (answer.errors?.length) throw new Error(answer.errors.map((e) => e.message).join('; '));
  return answer.data!;
}

interface Opened {
  page: Page;
  /** Console errors and uncaught exceptions of the page. */
  errors: string[];
}

/** A fresh browser context at `width`×`height`, signed in with `token` on the first config process. */
async function signIn(token: string, view = 'cluster', viewport = { width: 1280, height: 800 }): Promise<Opened> {
  const context = await browser.newContext({ viewport });
  // A missing element fails the step that looks for it, well inside the test's own timeout.
  context.setDefaultTimeout(10_000);
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
  page.on('pageerror', (error) => errors.push(String(error)));
  await page.goto(`${cluster.node('config').url}/#/${view}`);
  await page.getByLabel('Control-plane token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Views' }).waitFor();
  return { page, errors };
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `dashboard-${name}.png`), fullPage: true });
}

async function insert(from: number, count: number): Promise<void> {
  const documents = Array.from({ length: count }, (_, i) => ({ _id: from + i, x: from + i, pad }));
  const answer = await api.call('POST', '/v1/dash/events/insert', { documents });
  expect(answer.json).toMatchObject({ insertedCount: count });
}

const bandChunks = async (page: Page) => Number(await page.getByTestId('keyspace-band').getAttribute('data-chunks'));

describe('the dashboard', () => {
  it('serves the page from the config server, offline-ready under a strict content security policy', async () => {
    const response = await fetch(`${cluster.node('config').url}/`);
    expect(response.status, await response.clone().text()).toBe(200);
    expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await response.text();
    expect(html).toContain('<div id="root">');
    // Every script and stylesheet is served by this origin: nothing from a CDN (the icon is inline).
    for (const [, src] of html.matchAll(/(?:src|href)="([^"]+)"/g)) expect(src).toMatch(/^(\.?\/|data:,$)/);
    expect((await fetch(`${cluster.node('config').url}/no-such-page`)).status).toBe(404);
  });

  it('signs in, and shows splits and a migration on the key-space and migrations views as they happen', async () => {
    const { page, errors } = await signIn(ADMIN, `keyspace?ns=${NS}`);
    const migrations = await signIn(ADMIN, 'migrations');
    await expect.poll(() => bandChunks(page), { timeout: 20_000 }).toBe(1);

    for (let batch = 0; batch < 20; batch++) await insert(batch * 100, 100);
    // Auto-split may still be cutting when the band first passes 3 chunks: wait until band and catalog agree.
    const bandAgainstCatalog = async () => {
      const shown = await bandChunks(page);
      const { collection } = await graphql<{ collection: { chunks: { totalCount: number } } }>(
        `{ collection(ns: "${NS}") { chunks { totalCount } } }`,
      );
      return shown > 3 && shown === collection.chunks.totalCount
        ? 'in step'
        : `band ${shown} chunks, catalog ${collection.chunks.totalCount}`;
    };
    await expect.poll(bandAgainstCatalog, { timeout: 30_000 }).toBe('in step');
    await expect.poll(async () => page.getByTestId('last-change').textContent(), { timeout: 10_000 }).toMatch(/split/);

    const donor = (await graphql<{ chunkForKey: { shard: string } }>(`{ chunkForKey(ns: "${NS}", key: { x: 0 }) { shard } }`)).chunkForKey
      .shard;
    const recipient = donor === 'shard0' ? 'shard1' : 'shard0';
    await graphql(`mutation { moveChunk(ns: "${NS}", find: { x: 0 }, to: "${recipient}", wait: true) { state } }`);
    // The key-space band repaints with the moved chunk on the recipient, without a reload.
    await expect.poll(async () => page.getByTestId(`legend-${recipient}`).getAttribute('data-count'), { timeout: 20_000 }).toBe('1');
    await expect.poll(async () => page.getByTestId('last-change').textContent(), { timeout: 20_000 }).toMatch(/moveChunk\.commit/);
    await page.getByTestId('keyspace-band').hover({ position: { x: 2, y: 30 } });
    await expect.poll(async () => page.getByTestId('chunk-details').textContent()).toContain(recipient);
    await shot(page, 'keyspace');

    const recent = migrations.page.getByTestId('recent-migrations');
    await expect.poll(async () => recent.textContent(), { timeout: 20_000 }).toMatch(/committed/);
    await expect(recent.textContent()).resolves.toContain(`${donor} → ${recipient}`);
    await shot(migrations.page, 'migrations');

    await page.goto(`${cluster.node('config').url}/#/distribution?ns=${NS}`);
    await expect.poll(async () => page.getByTestId('distribution').textContent(), { timeout: 20_000 }).toContain(recipient);
    await expect.poll(async () => page.getByTestId('why-idle').textContent(), { timeout: 10_000 }).toMatch(/balancer is off/);
    await shot(page, 'distribution');
    expect(errors).toEqual([]);
    expect(migrations.errors).toEqual([]);
  });

  it('loses no event when its config server is killed and comes back: the feed resumes after its last seq', async () => {
    const { page, errors } = await signIn(ADMIN, 'feed');
    await page.getByLabel('Namespace').fill(NS);
    await expect.poll(async () => page.getByTestId('connection').textContent(), { timeout: 10_000 }).toBe('live');

    const seqs = async (node: string) =>
      (
        await graphql<{ changelog: { nodes: Array<{ seq: number; kind: string }> } }>(
          `{ changelog(first: 1000, filter: { ns: "${NS}", topics: ["placement", "migrations", "balancer", "topology", "ddl", "sessions", "transactions"] }) { nodes { seq kind } } }`,
          {},
          node,
        )
      ).changelog.nodes;
    const before = (await seqs('config')).at(-1)?.seq ?? 0;
    await cluster.kill('config');
    await expect.poll(async () => page.getByTestId('connection').textContent(), { timeout: 10_000 }).toBe('reconnecting');
    // While the page's server is down, the other config process splits the collection.
    await waitForLeader(cluster.configClient('config1'));
    const splits = [9_100, 9_200, 9_300];
    for (const at of splits) await graphql(`mutation { splitChunk(ns: "${NS}", at: { x: ${at} }) { version } }`, {}, 'config1');
    await cluster.restart('config');

    const events = await seqs('config1');
    const after = events.filter((e) => e.seq > before);
    expect(after.filter((e) => e.kind === 'split')).toHaveLength(splits.length);
    const shownSeqs = async () =>
      (
        await page
          .getByTestId('feed')
          .locator('li')
          .evaluateAll((items) => items.map((li) => Number(li.getAttribute('data-seq'))))
      ).sort((a, b) => a - b);
    // Every event from the outage is shown, and the feed has no gap and no stranger anywhere in its range.
    await expect.poll(async () => (await shownSeqs()).filter((seq) => seq > before), { timeout: 30_000 }).toEqual(after.map((e) => e.seq));
    const shown = await shownSeqs();
    expect(shown).toEqual(events.map((e) => e.seq).filter((seq) => seq >= shown[0]!));
    await expect.poll(async () => page.getByTestId('connection').textContent()).toBe('live');
    await shot(page, 'feed-after-reconnect');
    // The outage's own failures (the socket, the refetches) are the only console errors.
    expect(errors.filter((e) => !/WebSocket|Failed to load resource|Failed to fetch|ERR_CONNECTION_REFUSED/.test(e))).toEqual([]);
  });

  it('keeps a viewer out of the settings: no link, no form, and the control plane refuses its mutations', async () => {
    const { page, errors } = await signIn(VIEWER);
    await expect(page.getByRole('navigation', { name: 'Views' }).textContent()).resolves.not.toContain('Settings');
    await page.goto(`${cluster.node('config').url}/#/settings`);
    await expect.poll(async () => page.locator('#view').textContent()).toContain('needs a role that changes the cluster');
    await expect(page.getByTestId('signed-in').textContent()).resolves.toBe('viewer');
    expect(await page.getByRole('button', { name: /balancer/i }).count()).toBe(0);
    await expect(graphql('mutation { setBalancerState(enabled: true) { mode } }', {}, 'config', VIEWER)).rejects.toThrow(/not authorized/);
    await shot(page, 'viewer-settings');
    expect(errors).toEqual([]);
  });

  it('lets an admin change a setting and shows the refusal of a bad one', async () => {
    const { page, errors } = await signIn(ADMIN, 'settings');
    await page.getByLabel('Chunk size (MiB)').fill('0.001');
    await page.getByRole('button', { name: 'Save chunk size' }).click();
    await expect.poll(async () => page.getByRole('alert').first().textContent()).toMatch(/65536|64 KiB|at least/i);
    await page.getByRole('button', { name: 'Start the balancer' }).click();
    await expect.poll(async () => page.getByTestId('settings-balancer-mode').textContent()).toBe('on');
    await page.getByRole('button', { name: 'Stop the balancer' }).click();
    await expect.poll(async () => page.getByTestId('settings-balancer-mode').textContent()).toBe('off');
    await shot(page, 'settings');
    expect(errors).toEqual([]);
  });

  it('passes axe-core WCAG 2 A/AA checks on every view, at 1280×800 and on a 390-pixel phone, with focus visible', async () => {
    for (const viewport of [
      { width: 1280, height: 800 },
      { width: 390, height: 844 },
    ]) {
      const { page, errors } = await signIn(ADMIN, 'cluster', viewport);
      for (const view of ['cluster', `keyspace?ns=${NS}`, `distribution?ns=${NS}`, 'migrations', 'feed', 'sessions', 'settings']) {
        await page.goto(`${cluster.node('config').url}/#/${view}`);
        await page.locator('#view h1').waitFor();
        await page.waitForTimeout(500);
        await page.evaluate(AXE);
        const violations = await page.evaluate(async () => {
          const axe = (
            globalThis as unknown as {
              axe: { run: (o: unknown) => Promise<{ violations: Array<{ id: string; nodes: Array<{ target: unknown }> }> }> };
            }
          ).axe;
          const result = await axe.run({ runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa'] } });
          return result.violations.map((v) => `${v.id}: ${JSON.stringify(v.nodes.map((n) => n.target))}`);
        });
        expect(violations, `${view} at ${viewport.width}px`).toEqual([]);
        await shot(page, `${view.split('?')[0]}-${viewport.width}`);
        // No horizontal scrolling of the page itself on the phone: wide tables scroll in their card.
        expect(
          await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth + 1'),
          `${view} fits ${viewport.width}px`,
        ).toBe(true);
      }
      await page.keyboard.press('Tab');
      const outline = await page.evaluate('getComputedStyle(document.activeElement).outlineStyle');
      expect(outline).not.toBe('none');
      expect(errors).toEqual([]);
    }
  });
});
