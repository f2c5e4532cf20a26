// The README's example is examples/refund-graph.ts, and it prints what the README says.
import { join } from 'node:path';
import { describeReadmeExample } from '../../../test/support/package-readme.js';

describeReadmeExample(join(import.meta.dirname, '..'), 'examples/refund-graph.ts');
