import request from 'supertest';
import type { Test } from 'supertest';
import { orderBody } from './fixtures';

/** The createOrder mutation, with every field of the order it answers. */
export const CREATE_ORDER = `mutation CreateOrder($input: CreateOrderInput!) {
  createOrder(input: $input) { id status currency amount_total items { sku quantity unit_amount } created_at }
}`;

/** A GraphQL answer: the data, and the errors with their `extensions.code`. */
export interface GraphqlAnswer<T = Record<string, unknown>> {
  data?: T | null;
  errors?: { message: string; path?: string[]; extensions?: { code?: string; retryAfter?: number; [k: string]: unknown } }[];
}

/** POST /graphql with the client's key and, when given, an Idempotency-Key header. */
export function graphql(server: unknown, auth: Record<string, string>, body: { query: string; variables?: Record<string, unknown> }, key?: string): Test {
  const test = request(server as Parameters<typeof request>[0]).post('/graphql').set(auth).set('Content-Type', 'application/json');
  if (key !== undefined) test.set('Idempotency-Key', key);
  return test.send(body);
}

/** The createOrder mutation of an order body (orderBody's shape) under `key`. */
export function createOrderMutation(server: unknown, auth: Record<string, string>, key: string | undefined, input: Record<string, unknown> = orderBody()): Test {
  return graphql(server, auth, { query: CREATE_ORDER, variables: { input } }, key);
}

/** The first error's code of a GraphQL answer. */
export function errorCode(answer: GraphqlAnswer): string | undefined {
  return answer.errors?.[0]?.extensions?.code;
}
