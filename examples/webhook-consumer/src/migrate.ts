import 'reflect-metadata';
import { migrate } from './data-source';

migrate().then(
  (ran) => console.log(ran.length ? `migrated: ${ran.join(', ')}` : 'nothing to migrate'),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
