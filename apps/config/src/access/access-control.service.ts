import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  type Credential,
  FailedSignIns,
  type RoleGrant,
  TesseraError,
  invalidGrant,
  parseAuthorization,
  validUserName,
} from '@tessera/core';
import {
  Bulkhead,
  LOGGER,
  type Queryable,
  SETTINGS,
  advertisedUrl,
  apiKeyDigest,
  hashPassword,
  newApiKey,
  verifyPassword,
} from '@tessera/platform';
import type { AuditEntry, AuthenticateResult, Principal } from '@tessera/protocol';
import type { ConfigSettings } from '../config.settings.js';
import { AccessStore, type ApiKeyRecord, type UserRecord } from './access.store.js';

/** Who asks for a change, and from where: what the audit log records of it. */
export interface Actor {
  readonly user: string | null;
  readonly remoteAddress: string | null;
}

/** The shortest password a user may be given. */
export const MIN_PASSWORD_LENGTH = 12;

/**
 * The users, their roles and API keys, kept on the config server (MongoDB's admin.system.users):
 * sign-ins, the changes userAdmin makes, and the users the environment names (root, and the
 * control plane's admin and viewer tokens), made or brought in step at every start. Every change
 * moves the users' generation in its transaction, so nodes that cache identities read them again,
 * and is written to the audit log; so is every failed sign-in.
 */
@Injectable()
export class AccessControlService implements OnModuleInit {
  private readonly failedSignIns = new FailedSignIns();
  /**
   * Password hashes are slow by design and run on libuv's four threads, beside the node's other
   * work: two at a time, and a flood past PASSWORD_CHECKS_WAITING is refused at once
   * (TemporarilyUnavailable, retry after 1 s) rather than queued until the callers time out.
   */
  private readonly passwordChecks = new Bulkhead(2, PASSWORD_CHECKS_WAITING);

  constructor(
    private readonly store: AccessStore,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.seedFromEnvironment();
  }

  /**
   * root (TESSERA_ROOT_KEY), admin (TESSERA_ADMIN_TOKEN: clusterAdmin, dbAdminAnyDatabase and
   * userAdminAnyDatabase: every control-plane operation, as the admin token could, and no
   * document) and viewer (TESSERA_VIEWER_TOKEN: clusterMonitor), each with
   * its key set to the environment's. Idempotent, so config processes starting together agree.
   */
  private async seedFromEnvironment(): Promise<void> {
    const seeds: Array<{ user: string; key: string | undefined; roles: RoleGrant[] }> = [
      { user: 'root', key: this.settings.TESSERA_ROOT_KEY, roles: [{ role: 'root', db: 'admin' }] },
      {
        user: 'admin',
        key: this.settings.TESSERA_ADMIN_TOKEN,
        roles: [
          { role: 'clusterAdmin', db: 'admin' },
          { role: 'dbAdminAnyDatabase', db: 'admin' },
          { role: 'userAdminAnyDatabase', db: 'admin' },
        ],
      },
      { user: 'viewer', key: this.settings.TESSERA_VIEWER_TOKEN, roles: [{ role: 'clusterMonitor', db: 'admin' }] },
    ];
    await this.store.transaction(async (db) => {
      let changed = false;
      for (const seed of seeds) {
        if (seed.key === undefined) continue;
        changed = (await this.store.upsertUser(db, seed.user, seed.roles)) || changed;
        const description = `the ${seed.user} key from the environment`;
        changed =
          (await this.store.upsertApiKey(db, { id: seed.user, user: seed.user, digest: apiKeyDigest(seed.key), description })) || changed;
      }
      if (changed) await this.store.bumpGeneration(db);
    });
  }

  generation(): Promise<number> {
    return this.store.generation();
  }

  /**
   * Who `authorization` belongs to. A wrong or unknown credential answers AUTHENTICATION_FAILED
   * (the same for a wrong user, password or key: the answer says nothing of which), after a
   * delay that grows with the failures counted against its user or key and its address.
   */
  async authenticate(authorization: string, remoteAddress: string | undefined, node: string): Promise<AuthenticateResult> {
    const credential = parseAuthorization(authorization);
    const subjects = [`address:${remoteAddress ?? 'unknown'}`, subjectOf(credential)];
    const delay = this.failedSignIns.delayMs(subjects, Date.now());
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    const generation = await this.store.generation();
    const principal = await this.verify(credential);
    if (principal !== undefined) {
      this.failedSignIns.succeeded(subjectOf(credential));
      return { principal, generation };
    }
    const failures = this.failedSignIns.failed(subjects, Date.now());
    await this.audit({
      user: credential.kind === 'password' ? credential.user : null,
      remoteAddress: remoteAddress ?? null,
      node,
      action: 'authenticate',
      target: null,
      outcome: 'refused',
      details: { mechanism: credential.kind, ...(credential.kind === 'malformed' ? { reason: credential.reason } : {}), failures },
    });
    throw new TesseraError('AUTHENTICATION_FAILED', 'Authentication failed.');
  }

  private async verify(credential: Credential): Promise<Principal | undefined> {
    if (credential.kind === 'apiKey') {
      const key = await this.store.keyByDigest(apiKeyDigest(credential.key));
      return key === undefined ? undefined : { user: key.user, roles: key.roles, keyId: key.id };
    }
    if (credential.kind === 'password') {
      const stored = await this.store.credentialsOf(credential.user);
      // A missing user costs a hash too, so the time does not tell who exists.
      const ok = await this.passwordChecks.run(
        () => verifyPassword(credential.password, stored?.passwordHash ?? DUMMY_HASH),
        () =>
          new TesseraError('RATE_LIMITED', 'too many sign-ins with a password at once; retry after 1 s', {
            details: { retryAfterSeconds: 1 },
          }),
      );
      return ok && stored?.passwordHash !== null && stored !== undefined ? { user: credential.user, roles: stored.roles } : undefined;
    }
    return undefined;
  }

  /** Whether no user exists yet: MongoDB's localhost exception lets the first one be created from 127.0.0.1. */
  async noUsers(): Promise<boolean> {
    return (await this.store.userCount()) === 0;
  }

  async createUser(actor: Actor, input: { name: string; password?: string | null; roles: readonly RoleGrant[] }): Promise<UserRecord> {
    checkUserName(input.name);
    checkRoles(input.roles);
    const passwordHash = input.password === undefined || input.password === null ? null : await hashPassword(checkPassword(input.password));
    const created = await this.change(actor, 'createUser', input.name, { roles: input.roles }, async (db) => {
      if (!(await this.store.insertUser(db, input.name, passwordHash, input.roles))) {
        throw new TesseraError('DUPLICATE_KEY', `user ${JSON.stringify(input.name)} already exists`, { details: { user: input.name } });
      }
      return (await this.store.user(input.name, db))!;
    });
    this.logger.info({ user: input.name, by: actor.user }, 'user created');
    return created;
  }

  async updateUser(actor: Actor, input: { name: string; password?: string | null; roles?: readonly RoleGrant[] }): Promise<UserRecord> {
    if (input.roles !== undefined) checkRoles(input.roles);
    const change: { roles?: readonly RoleGrant[]; passwordHash?: string | null } = {};
    if (input.roles !== undefined) change.roles = input.roles;
    if (input.password !== undefined)
      change.passwordHash = input.password === null ? null : await hashPassword(checkPassword(input.password));
    const details = { ...(input.roles !== undefined ? { roles: input.roles } : {}), passwordChanged: input.password !== undefined };
    return this.change(actor, 'updateUser', input.name, details, async (db) => {
      if (!(await this.store.updateUser(db, input.name, change))) throw noSuchUser(input.name);
      return (await this.store.user(input.name, db))!;
    });
  }

  async dropUser(actor: Actor, name: string): Promise<void> {
    await this.change(actor, 'dropUser', name, {}, async (db) => {
      if (!(await this.store.deleteUser(db, name))) throw noSuchUser(name);
    });
  }

  /** A new API key of `user`: the key is in this answer and nowhere else. */
  async createApiKey(actor: Actor, input: { user: string; description?: string }): Promise<ApiKeyRecord & { key: string }> {
    const { id, key } = newApiKey();
    const description = (input.description ?? '').slice(0, 200);
    return this.change(actor, 'createApiKey', input.user, { keyId: id }, async (db) => {
      if ((await this.store.user(input.user, db)) === undefined) throw noSuchUser(input.user);
      await this.store.insertApiKey(db, { id, user: input.user, digest: apiKeyDigest(key), description });
      return { id, user: input.user, description, createdAt: new Date().toISOString(), key };
    });
  }

  async revokeApiKey(actor: Actor, id: string): Promise<void> {
    await this.change(actor, 'revokeApiKey', id, {}, async (db) => {
      if (!(await this.store.deleteApiKey(db, id))) throw new TesseraError('NOT_FOUND', `no API key has the id ${JSON.stringify(id)}`);
    });
  }

  users(): Promise<UserRecord[]> {
    return this.store.users();
  }

  apiKeys(user?: string): Promise<ApiKeyRecord[]> {
    return this.store.apiKeys(user);
  }

  /** Writes one audit entry (admin actions of other services, refusals of the doors). */
  async audit(entry: AuditEntry): Promise<void> {
    await this.store.appendAudit([entry]);
  }

  /** Entries another node saw (a router's refusals and admin commands). */
  async recordAudit(entries: readonly AuditEntry[]): Promise<void> {
    await this.store.appendAudit(entries);
  }

  /**
   * One change of users or keys: `work`, the generation's step and its audit entry commit in one
   * transaction; a refused change is audited on its own.
   */
  private async change<T>(
    actor: Actor,
    action: string,
    target: string,
    details: Record<string, unknown>,
    work: (db: Queryable) => Promise<T>,
  ): Promise<T> {
    const entry = { user: actor.user, remoteAddress: actor.remoteAddress, node: this.node, action, target, details };
    try {
      return await this.store.transaction(async (db) => {
        const result = await work(db);
        await this.store.bumpGeneration(db);
        await this.store.appendAudit([{ ...entry, outcome: 'ok' }], db);
        return result;
      });
    } catch (error) {
      const reason = error instanceof TesseraError ? error.code : 'INTERNAL';
      await this.store.appendAudit([{ ...entry, outcome: 'failed', details: { ...details, error: reason } }]);
      throw error;
    }
  }

  /** This process as the audit log names it. */
  get node(): string {
    return this.settings.TESSERA_NODE_NAME ?? advertisedUrl(this.settings);
  }
}

/** A stored-form hash of a password nobody has, to verify against for unknown users. */
/** Password sign-ins waiting for a hash; past it, refused (a node's callers wait 10 s at most). */
const PASSWORD_CHECKS_WAITING = 32;

const DUMMY_HASH = 'scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';

function subjectOf(credential: Credential): string {
  if (credential.kind === 'password') return `user:${credential.user}`;
  if (credential.kind === 'apiKey') return `key:${credential.key.slice(0, 16)}`;
  return 'malformed';
}

function noSuchUser(name: string): TesseraError {
  return new TesseraError('NOT_FOUND', `no user is named ${JSON.stringify(name)}`, { details: { user: name } });
}

function checkUserName(name: string): void {
  if (!validUserName(name)) {
    throw new TesseraError('BAD_VALUE', 'a user name is 1 to 128 characters, with no colon, control character or surrounding space');
  }
}

function checkRoles(roles: readonly RoleGrant[]): void {
  for (const grant of roles) {
    const why = invalidGrant(grant);
    if (why !== undefined) throw new TesseraError('BAD_VALUE', why, { details: { role: grant.role, db: grant.db } });
  }
}

function checkPassword(password: string): string {
  if (password.length < MIN_PASSWORD_LENGTH || password.length > 1_024) {
    throw new TesseraError('BAD_VALUE', `a password is ${MIN_PASSWORD_LENGTH} to 1,024 characters`);
  }
  return password;
}
