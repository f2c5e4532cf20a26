/** A `.wasm` import in a worker bundle is a compiled module (wrangler's and miniflare's CompiledWasm). */
declare module '*.wasm' {
  const module: WebAssembly.Module;
  export default module;
}
