// Module resolution hooks for hide-better-sqlite3.mjs.
export async function resolve(specifier, context, next) {
  if (specifier === 'better-sqlite3' || specifier.startsWith('better-sqlite3/')) {
    const err = new Error(`Cannot find package '${specifier}' imported from ${context.parentURL}`);
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
  return next(specifier, context);
}
