// Generates src/generated/wire.ts from protocol/schema.json, the wire contract's source of truth.
// `node scripts/generate-protocol.mjs` rewrites the file; `--check` fails when it is stale.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const SCHEMA_PATH = join(here, "..", "..", "..", "protocol", "schema.json");
export const OUTPUT_PATH = join(here, "..", "src", "generated", "wire.ts");

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function refName(ref) {
  return ref.replace("#/$defs/", "");
}

function typeOf(schema) {
  if (schema === true || schema === undefined || Object.keys(schema).length === 0) {
    return "unknown";
  }
  if (schema.$ref) return refName(schema.$ref);
  if (schema.anyOf) return [...new Set(schema.anyOf.map(typeOf))].join(" | ");
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  switch (schema.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array": {
      const item = typeOf(schema.items);
      return item.includes(" ") ? `(${item})[]` : `${item}[]`;
    }
    case "object":
      return schema.properties ? objectType(schema, "") : "Record<string, unknown>";
    default:
      return "unknown";
  }
}

function doc(text, indent) {
  if (!text) return "";
  const clean = text.replace(/``/g, "`").replace(/\*\//g, "*\\/").trim();
  const lines = clean.split("\n");
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")}\n${indent} */\n`;
}

function objectType(schema, indent) {
  const required = new Set(schema.required ?? []);
  let body = "{\n";
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const key = IDENTIFIER.test(name) ? name : JSON.stringify(name);
    const optional = required.has(name) ? "" : "?";
    body += doc(prop.description, `${indent}  `);
    body += `${indent}  ${key}${optional}: ${typeOf(prop)};\n`;
  }
  if (schema.additionalProperties === true) {
    body += `${indent}  [key: string]: unknown;\n`;
  }
  return `${body}${indent}}`;
}

export function generate(schema) {
  let out =
    "// Generated from protocol/schema.json by scripts/generate-protocol.mjs. Do not edit:\n" +
    "// run `npm run generate` after the contract changes (a test checks this file is current).\n\n";
  out += `export const PROTOCOL_VERSION = ${JSON.stringify(String(schema.version))};\n\n`;
  for (const [name, def] of Object.entries(schema.$defs)) {
    out += doc(def.description, "");
    if (Object.keys(def.properties ?? {}).length === 0 && def.additionalProperties !== true) {
      out += `export type ${name} = Record<string, never>;\n\n`;
    } else {
      out += `export interface ${name} ${objectType(def, "")}\n\n`;
    }
  }
  const methods = Object.entries(schema.methods);
  out += "/** Requests a client sends, with their params and result types. */\n";
  out += "export interface RequestTypes {\n";
  for (const [method, spec] of methods.filter(([, s]) => s.kind === "request")) {
    out += doc(spec.description, "  ");
    out += `  ${JSON.stringify(method)}: { params: ${typeOf(spec.params)}; result: ${typeOf(spec.result)} };\n`;
  }
  out += "}\n\n";
  out += "/** Notifications the daemon pushes, with their params types. */\n";
  out += "export interface NotificationTypes {\n";
  for (const [method, spec] of methods.filter(([, s]) => s.kind === "notification")) {
    out += doc(spec.description, "  ");
    out += `  ${JSON.stringify(method)}: ${typeOf(spec.params)};\n`;
  }
  out += "}\n\n";
  const list = (kind) =>
    methods
      .filter(([, s]) => s.kind === kind)
      .map(([m]) => `  ${JSON.stringify(m)},\n`)
      .join("");
  out += `export const REQUESTS = [\n${list("request")}] as const;\n\n`;
  out += `export const NOTIFICATIONS = [\n${list("notification")}] as const;\n\n`;
  out += "export const ERROR_CODES = {\n";
  for (const [name, code] of Object.entries(schema.errorCodes)) {
    out += `  ${name}: ${code},\n`;
  }
  out += "} as const;\n";
  return out;
}

function main() {
  const schema = JSON.parse(readFileSync(SCHEMA_PATH, "utf8"));
  const text = generate(schema);
  if (process.argv.includes("--check")) {
    const current = readFileSync(OUTPUT_PATH, "utf8");
    if (current !== text) {
      console.error(`${OUTPUT_PATH} is stale: run \`npm run generate\``);
      process.exit(1);
    }
    return;
  }
  writeFileSync(OUTPUT_PATH, text);
  console.log(`wrote ${OUTPUT_PATH}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main();
}
