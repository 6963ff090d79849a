/**
 * Builds the dashboard (dashboard/src) into dist/dashboard, which the server
 * serves at / and /assets/* (src/server/dashboard.ts). Run by `npm run build`.
 *
 * JSX is compiled by Vite's own transform with Preact's automatic runtime, so
 * no Babel preset is needed. Asset names carry a content hash (the server
 * caches /assets/* as immutable), and no inline script is emitted (the
 * page's Content-Security-Policy allows only 'self').
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = fileURLToPath(new URL(".", import.meta.url));

export default defineConfig({
  root: here,
  base: "/",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: fileURLToPath(new URL("../dist/dashboard", import.meta.url)),
    emptyOutDir: true,
    assetsDir: "assets",
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    chunkSizeWarningLimit: 200,
  },
});
