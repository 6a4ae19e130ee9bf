import { CanActivate, ExecutionContext, Injectable, UnauthorizedException } from '@nestjs/common';
import type { Request } from 'express';

export type AuthenticatedRequest = Request & { user?: { id: string } };

/** Stands in for your authentication: the caller is the X-User-Id header (1 to 64 letters, digits, `_` or `-`). */
@Injectable()
export class UserGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const id = req.header('x-user-id');
    if (!id || !/^[\w-]{1,64}$/.test(id)) throw new UnauthorizedException('X-User-Id must be 1 to 64 letters, digits, _ or -');
    req.user = { id };
    return true;
  }
}
