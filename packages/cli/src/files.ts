/**
 * The operator's files are read (and the demo's JSONL files appended to) only when they are
 * regular files: the one implementation lives in `@ctrlrun/store-node`, beside `fromFile`.
 *
 * @module
 */
export { appendRegularFile, MAX_INPUT_BYTES, readRegularFile, UnreadableFile, type UnreadableReason } from '@ctrlrun/store-node';
