import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, IsUUID, Max, Min } from 'class-validator';
import { ProblemException } from './problem';

/**
 * Cursor pagination, newest first: `?limit=&starting_after=<id>` returns the
 * items created before that item (ordered by created_at, then id). Stable under
 * inserts, unlike offsets.
 */
export class PageQueryDto {
  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 10, description: 'Items per page' })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;

  @ApiPropertyOptional({ format: 'uuid', description: 'Cursor: the id of the last item of the previous page' })
  @IsOptional()
  @IsUUID()
  starting_after?: string;
}

export interface Page<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  /** Pass as `starting_after` to get the next page; null on the last page. */
  next_cursor: string | null;
}

export const DEFAULT_PAGE_SIZE = 10;

export interface KeysetSource<R> {
  /** Whether the caller has an item with this id (a valid cursor). */
  exists(id: string): Promise<boolean>;
  /** Up to `limit + 1` items, newest first, created before the item `afterId` when given. */
  fetch(limit: number, afterId?: string): Promise<R[]>;
}

/**
 * One page of a client's items, newest first, after the `starting_after` cursor.
 * The cursor is an id, resolved to its exact (created_at, id) inside the query;
 * only an empty page asks whether the cursor exists (400 invalid_cursor if not).
 */
export async function keysetPage<R extends { id: string }, T>(query: PageQueryDto, source: KeysetSource<R>, map: (row: R) => T): Promise<Page<T>> {
  const limit = query.limit ?? DEFAULT_PAGE_SIZE;
  const rows = await source.fetch(limit, query.starting_after);
  if (query.starting_after && rows.length === 0 && !(await source.exists(query.starting_after))) {
    throw invalidCursor(query.starting_after);
  }
  return toPage(rows, limit, map);
}

/** Builds a page from `limit + 1` rows fetched (the extra row tells has_more). */
function toPage<R extends { id: string }, T>(rows: R[], limit: number, map: (row: R) => T): Page<T> {
  const has_more = rows.length > limit;
  const items = rows.slice(0, limit);
  return {
    object: 'list',
    data: items.map(map),
    has_more,
    next_cursor: has_more ? items[items.length - 1].id : null,
  };
}

export function invalidCursor(cursor: string): ProblemException {
  return new ProblemException({
    status: 400,
    code: 'invalid_cursor',
    title: 'Invalid Cursor',
    detail: `starting_after=${cursor} is not an item of yours.`,
  });
}
