import { Field, Float, InputType, ObjectType } from '@nestjs/graphql';
import { JsonScalar } from './json.scalar.js';

@ObjectType('RoleGrant', { description: 'A built-in role granted on a database (the cluster-wide roles on admin).' })
export class RoleGrantType {
  @Field({
    description:
      'read, readWrite, dbAdmin, userAdmin, dbOwner, readAnyDatabase, readWriteAnyDatabase, dbAdminAnyDatabase, userAdminAnyDatabase, clusterMonitor, clusterManager, clusterAdmin or root.',
  })
  role!: string;
  @Field()
  db!: string;
}

@InputType('RoleGrantInput')
export class RoleGrantInput {
  @Field()
  role!: string;
  @Field()
  db!: string;
}

@ObjectType('User', { description: 'A user: never its password, only whether it has one.' })
export class UserType {
  @Field()
  name!: string;
  @Field(() => [RoleGrantType])
  roles!: RoleGrantType[];
  @Field({ description: 'Whether the user may sign in with a password (Basic); API keys work either way.' })
  hasPassword!: boolean;
  @Field()
  createdAt!: string;
  @Field()
  updatedAt!: string;
}

@ObjectType('ApiKey', { description: 'An API key: its id and owner, never the key.' })
export class ApiKeyType {
  @Field()
  id!: string;
  @Field()
  user!: string;
  @Field()
  description!: string;
  @Field()
  createdAt!: string;
}

@ObjectType('CreatedApiKey', { description: 'A new API key, with the key itself: shown in this answer only.' })
export class CreatedApiKeyType extends ApiKeyType {
  @Field({ description: 'Send it as "Authorization: Bearer <key>". It is stored only as a digest, and cannot be shown again.' })
  key!: string;
}

@ObjectType('WhoAmI', { description: 'The signed-in user, and the root fields its roles allow whatever their arguments.' })
export class WhoAmIType {
  @Field()
  user!: string;
  @Field(() => [RoleGrantType])
  roles!: RoleGrantType[];
  @Field(() => String, { nullable: true, description: 'The API key it signed in with, when a key.' })
  keyId!: string | null;
  @Field(() => [String], {
    description:
      'Root fields ("Query.cluster", "Mutation.setBalancerState", ...) allowed on any argument; fields that check a namespace are listed when allowed on every namespace.',
  })
  allowed!: string[];
}

@ObjectType('AuditEntry', { description: 'Who did what, when, from where, and how it ended.' })
export class AuditEntryType {
  @Field(() => Float)
  seq!: number;
  @Field()
  at!: string;
  @Field(() => String, { nullable: true, description: 'Null for a caller without a verified user.' })
  user!: string | null;
  @Field(() => String, { nullable: true })
  remoteAddress!: string | null;
  @Field({ description: 'The node that recorded it.' })
  node!: string;
  @Field({ description: 'authenticate, createUser, updateUser, dropUser, createApiKey, revokeApiKey, or a control-plane mutation.' })
  action!: string;
  @Field(() => String, { nullable: true })
  target!: string | null;
  @Field({ description: 'ok, refused or failed.' })
  outcome!: string;
  @Field(() => JsonScalar)
  details!: Record<string, unknown>;
}
