import { CanActivate, ExecutionContext, Injectable, UnauthorizedException } from '@nestjs/common';

/** An account id as this app issues them: `acct_` and 3 to 24 lowercase letters or digits. Not a UUID. */
export const ACCOUNT_ID = /^acct_[a-z0-9]{3,24}$/;
export const ACCOUNT_HEADER = 'x-account-id';

export interface AccountRequest {
  headers: Record<string, string | string[] | undefined>;
  account?: { id: string };
}

/**
 * Stands in for real authentication: the caller's account is the `X-Account-Id` header.
 * Guards run before interceptors, so the idempotency module finds `req.account` set.
 */
@Injectable()
export class AccountGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<AccountRequest>();
    const id = req.headers[ACCOUNT_HEADER];
    if (typeof id !== 'string' || !ACCOUNT_ID.test(id)) throw new UnauthorizedException('X-Account-Id must look like acct_9f3');
    req.account = { id };
    return true;
  }
}

/** The idempotency scope: the account that owns the key. */
export const accountScope = (req: unknown): string | undefined => (req as AccountRequest).account?.id;
