import { GraphQLScalarType, Kind, type ValueNode } from 'graphql';

/**
 * Any JSON value. Shard keys and bounds are Extended JSON objects (`{"$numberLong": "5"}`,
 * `{"$minKey": 1}`), so a client passes and receives exactly what the REST API and the
 * changelog use.
 */
export const JsonScalar = new GraphQLScalarType({
  name: 'JSON',
  description: 'Any JSON value; shard keys and bounds are MongoDB Extended JSON.',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: literalValue,
});

function literalValue(node: ValueNode, variables?: Record<string, unknown> | null): unknown {
  switch (node.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return node.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(node.value);
    case Kind.NULL:
      return null;
    case Kind.ENUM:
      return node.value;
    case Kind.LIST:
      return node.values.map((v) => literalValue(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(node.fields.map((f) => [f.name.value, literalValue(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[node.name.value];
  }
}
