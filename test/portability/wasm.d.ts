/** A `.wasm` import in the workerd bundle is a compiled module (a CompiledWasm module). */
declare module '*.wasm' {
  const module: WebAssembly.Module;
  export default module;
}
