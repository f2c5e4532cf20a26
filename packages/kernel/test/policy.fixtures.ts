// Shared by the policy tests: the refusal `loadPolicy` must throw for a document.
import { expect } from 'vitest';
import { loadPolicy, PolicyError } from '@ctrlrun/kernel';

/** The PolicyError (code `ERR_POLICY`) `loadPolicy(yaml)` throws; fails the test if the document loads. */
export function refusal(yaml: string): PolicyError {
  try {
    loadPolicy(yaml);
  } catch (err) {
    expect(err).toBeInstanceOf(PolicyError);
    expect((err as PolicyError).code).toBe('ERR_POLICY');
    return err as PolicyError;
  }
  throw new Error(`expected a PolicyError for:\n${yaml}`);
}
