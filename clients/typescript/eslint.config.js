// Lint: typescript-eslint's strict type-checked rules over the sources, tests and example. The
// generated code in src/gen is the generator's; bench/ is its own package (its dependencies are
// not installed here) and is type-checked by its own strict build.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "build/", "src/gen/", "node_modules/", "bench/"] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
    },
  },
  { files: ["eslint.config.js"], ...tseslint.configs.disableTypeChecked },
);
