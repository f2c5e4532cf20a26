/**
 * The entry of a fault-run client in a worker thread: registers tsx's loader in this thread (a
 * thread does not inherit the parent's `--import tsx`) and loads the TypeScript worker
 * (`workerData.entry`), which reads its payload from `workerData.payload`.
 */
import { register } from 'tsx/esm/api';
import { workerData } from 'node:worker_threads';

register();
await import(workerData.entry);
