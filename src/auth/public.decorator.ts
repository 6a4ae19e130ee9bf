import { SetMetadata } from '@nestjs/common';

export const IS_PUBLIC = 'auth:public';

/** Marks a route (or controller) that needs no API key: health, metrics. */
export const Public = () => SetMetadata(IS_PUBLIC, true);
