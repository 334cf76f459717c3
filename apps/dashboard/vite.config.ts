import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Built into dist/dashboard beside the servers, which the config server serves at `/`. Every
// asset is bundled (no CDN, no remote font), so the page works with no network but the cluster's.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    chunkSizeWarningLimit: 1024,
  },
});
