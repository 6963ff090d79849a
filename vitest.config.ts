import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Process tests fork workers that share one SQLite file; running files in
    // parallel on a 2-core machine only makes them slower and noisier.
    fileParallelism: false,
  },
});
