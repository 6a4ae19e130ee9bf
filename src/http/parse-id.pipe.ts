import { Injectable, PipeTransform } from '@nestjs/common';
import { problems } from './problem';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A resource id in the path: anything that is not a UUID names nothing (404). */
@Injectable()
export class ParseIdPipe implements PipeTransform<string, string> {
  transform(value: string): string {
    if (!UUID.test(value)) throw problems.notFound(`No resource ${value}.`);
    return value.toLowerCase();
  }
}
