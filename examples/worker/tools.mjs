// A tool the example worker runs in-process (a `module:` executor): it gets the canonical arguments.
export function lookup(args) {
  return { payment_id: args.payment_id ?? null, status: 'paid' };
}
