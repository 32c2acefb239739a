// Loads a packaged extension (the `extension/` folder of an unzipped .vsix) with a stub
// `vscode` module, to prove every runtime dependency ships inside the .vsix.
// Usage: node scripts/load-extension.cjs <unzipped-vsix>/extension
"use strict";
const Module = require("node:module");
const path = require("node:path");

const root = path.resolve(process.argv[2] ?? ".");
const stub = new Proxy(function vscodeStub() {}, {
  get: (_target, prop) => (prop === "__esModule" ? true : prop === "version" ? "1.82.0" : stub),
  apply: () => stub,
  construct: () => stub,
});
const load = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === "vscode") return stub;
  const resolved = Module._resolveFilename(request, parent, isMain);
  if (!resolved.startsWith(root) && !Module.isBuiltin(request)) {
    throw new Error(`${request} resolved outside the package: ${resolved}`);
  }
  return load.apply(this, [request, parent, isMain]);
};
const manifest = require(path.join(root, "package.json"));
const extension = require(path.join(root, manifest.main));
if (typeof extension.activate !== "function" || typeof extension.deactivate !== "function") {
  throw new Error("the extension exports no activate/deactivate");
}
console.log(`loaded ${manifest.name} ${manifest.version} from ${root}`);
