/** Who is calling: every resource and idempotency key is scoped to this id. */
export interface AuthenticatedClient {
  id: string;
  name: string;
}
