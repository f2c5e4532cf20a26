import { defineConfig } from 'vitepress';

// The element's one module script, in every page's head; the wasm sits next to it and is fetched
// only when an element comes into view. Vue is told the tag is a custom element, not a component.
export default defineConfig({
  title: 'ctrlrun docs (example)',
  description: 'A VitePress site that embeds the ctrlrun try-it element.',
  head: [['script', { type: 'module', src: '/ctrlrun/ctrlrun-try-it.js' }]],
  vue: { template: { compilerOptions: { isCustomElement: (tag) => tag === 'ctrlrun-try-it' } } },
  themeConfig: {
    sidebar: [
      {
        text: 'Guide',
        items: [
          { text: 'Try it', link: '/' },
          { text: 'Try it twice', link: '/twice' },
        ],
      },
    ],
  },
});
