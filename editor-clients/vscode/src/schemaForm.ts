// A tool's JSON Schema turned into a sequence of prompts: strings, numbers and booleans
// get an input box or a pick, enums a pick, objects and arrays a JSON input box.
// The prompts go through the Prompter interface, which VS Code (or a test) implements.

import type { JsonSchemaObject } from "./protocol";

export type FieldKind = "string" | "integer" | "number" | "boolean" | "enum" | "json";

export interface FieldSpec {
  name: string;
  kind: FieldKind;
  required: boolean;
  description: string;
  /** The schema's default, when it has one (never `null`). */
  defaultValue?: unknown;
  /** The choices of an enum. */
  choices?: unknown[];
  /** The JSON type(s) a `json` field expects, for the prompt. */
  jsonType?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
}

type Schema = Record<string, unknown>;

function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The schema without its `null` alternative (`anyOf: [X, {type: null}]` → X). */
function nonNull(schema: Schema): Schema {
  const anyOf = schema.anyOf;
  if (Array.isArray(anyOf)) {
    const options = anyOf.filter((s): s is Schema => isSchema(s) && s.type !== "null");
    if (options.length === 1 && options[0] !== undefined) {
      const merged: Schema = { ...schema, ...options[0] };
      delete merged.anyOf;
      return merged;
    }
  }
  if (Array.isArray(schema.type)) {
    const types = (schema.type as unknown[]).filter((t) => t !== "null");
    if (types.length === 1) {
      return { ...schema, type: types[0] };
    }
  }
  return schema;
}

function kindOf(schema: Schema): FieldKind {
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    return "enum";
  }
  switch (schema.type) {
    case "string":
      return "string";
    case "integer":
      return "integer";
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    default:
      return "json";
  }
}

function numberOrUndefined(value: unknown): number | undefined {
  return typeof value === "number" ? value : undefined;
}

/** One FieldSpec per property: required ones first, each group in schema order. */
export function fieldsFromSchema(schema: JsonSchemaObject): FieldSpec[] {
  const properties = isSchema(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields: FieldSpec[] = [];
  for (const [name, raw] of Object.entries(properties)) {
    const prop = nonNull(isSchema(raw) ? raw : {});
    const kind = kindOf(prop);
    const field: FieldSpec = {
      name,
      kind,
      required: required.has(name),
      description: typeof prop.description === "string" ? prop.description : "",
    };
    if (prop.default !== undefined && prop.default !== null) {
      field.defaultValue = prop.default;
    }
    if (kind === "enum") {
      field.choices = prop.enum as unknown[];
    }
    if (kind === "json") {
      field.jsonType = typeof prop.type === "string" ? prop.type : "JSON";
    }
    const minimum = numberOrUndefined(prop.minimum);
    const maximum = numberOrUndefined(prop.maximum);
    const minLength = numberOrUndefined(prop.minLength);
    if (minimum !== undefined) field.minimum = minimum;
    if (maximum !== undefined) field.maximum = maximum;
    if (minLength !== undefined) field.minLength = minLength;
    fields.push(field);
  }
  return [...fields.filter((f) => f.required), ...fields.filter((f) => !f.required)];
}

export type Parsed = { ok: true; value: unknown } | { ok: false; error: string };

function checkRange(field: FieldSpec, value: number): Parsed {
  if (field.minimum !== undefined && value < field.minimum) {
    return { ok: false, error: `${field.name} must be at least ${field.minimum}` };
  }
  if (field.maximum !== undefined && value > field.maximum) {
    return { ok: false, error: `${field.name} must be at most ${field.maximum}` };
  }
  return { ok: true, value };
}

/** The typed value of what the user typed for `field`, or why it is wrong. */
export function parseFieldValue(field: FieldSpec, text: string): Parsed {
  switch (field.kind) {
    case "string":
    case "enum":
      if (field.minLength !== undefined && text.length < field.minLength) {
        return { ok: false, error: `${field.name} must not be empty` };
      }
      return { ok: true, value: text };
    case "integer": {
      const trimmed = text.trim();
      if (!/^-?\d+$/.test(trimmed)) {
        return { ok: false, error: `${field.name} must be a whole number` };
      }
      return checkRange(field, Number.parseInt(trimmed, 10));
    }
    case "number": {
      const value = Number(text.trim());
      if (text.trim() === "" || Number.isNaN(value)) {
        return { ok: false, error: `${field.name} must be a number` };
      }
      return checkRange(field, value);
    }
    case "boolean": {
      const lowered = text.trim().toLowerCase();
      if (lowered === "true" || lowered === "false") {
        return { ok: true, value: lowered === "true" };
      }
      return { ok: false, error: `${field.name} must be true or false` };
    }
    case "json":
      try {
        const value: unknown = JSON.parse(text);
        if (field.jsonType === "object" && !isSchema(value)) {
          return { ok: false, error: `${field.name} must be a JSON object` };
        }
        if (field.jsonType === "array" && !Array.isArray(value)) {
          return { ok: false, error: `${field.name} must be a JSON array` };
        }
        return { ok: true, value };
      } catch (error) {
        return { ok: false, error: `${field.name}: ${(error as Error).message}` };
      }
  }
}

export interface InputRequest {
  title: string;
  prompt: string;
  placeHolder?: string;
  value?: string;
  /** An error message for a value that cannot be accepted, else undefined. */
  validate: (text: string) => string | undefined;
}

export interface PickItem<T> {
  label: string;
  description?: string;
  detail?: string;
  value: T;
}

export interface PickRequest<T> {
  title: string;
  placeHolder: string;
  items: PickItem<T>[];
}

/** The UI the form needs; every method resolves to undefined when the user cancels. */
export interface Prompter {
  input(request: InputRequest): Promise<string | undefined>;
  pick<T>(request: PickRequest<T>): Promise<T | undefined>;
  pickMany<T>(request: PickRequest<T>): Promise<T[] | undefined>;
}

/** Sentinel for "leave this optional argument out". */
const OMIT = Symbol("omit");
const CANCELLED = Symbol("cancelled");

function describe(field: FieldSpec): string {
  const parts = [field.description || field.name];
  if (field.defaultValue !== undefined) {
    parts.push(`(default: ${JSON.stringify(field.defaultValue)})`);
  }
  return parts.join(" ");
}

async function askField(field: FieldSpec, title: string, prompter: Prompter): Promise<unknown> {
  const optionalHint = field.required ? "" : " Leave empty to use the default.";
  if (field.kind === "boolean" || field.kind === "enum") {
    const values = field.kind === "boolean" ? [true, false] : (field.choices ?? []);
    const items: PickItem<unknown>[] = values.map((v) => ({
      label: typeof v === "string" ? v : JSON.stringify(v),
      ...(v === field.defaultValue ? { description: "default" } : {}),
      value: v,
    }));
    if (!field.required) {
      items.unshift({ label: "(leave out)", description: "use the tool's default", value: OMIT });
    }
    const chosen = await prompter.pick({ title, placeHolder: describe(field), items });
    return chosen === undefined ? CANCELLED : chosen;
  }
  const placeHolder =
    field.kind === "json"
      ? field.jsonType === "JSON"
        ? "a JSON value"
        : `a JSON ${field.jsonType ?? "value"}`
      : field.kind;
  const text = await prompter.input({
    title,
    prompt: describe(field) + optionalHint,
    placeHolder,
    validate: (value) => {
      if (value === "" && !field.required) {
        return undefined;
      }
      if (value === "" && field.kind !== "string") {
        return `${field.name} is required`;
      }
      const parsed = parseFieldValue(field, value);
      return parsed.ok ? undefined : parsed.error;
    },
  });
  if (text === undefined) {
    return CANCELLED;
  }
  if (text === "" && !field.required) {
    return OMIT;
  }
  const parsed = parseFieldValue(field, text);
  return parsed.ok ? parsed.value : CANCELLED;
}

/**
 * Ask for a tool's arguments: every required field, then the optional fields the user
 * picks. Resolves to the arguments object, or undefined when the user cancelled.
 */
export async function collectArguments(
  toolName: string,
  schema: JsonSchemaObject,
  prompter: Prompter,
): Promise<Record<string, unknown> | undefined> {
  const fields = fieldsFromSchema(schema);
  const args: Record<string, unknown> = {};
  const ask = async (group: FieldSpec[], label: string): Promise<boolean> => {
    for (const [index, field] of group.entries()) {
      const title = `${toolName} — ${label} ${index + 1}/${group.length}: ${field.name}`;
      const value = await askField(field, title, prompter);
      if (value === CANCELLED) {
        return false;
      }
      if (value !== OMIT) {
        args[field.name] = value;
      }
    }
    return true;
  };
  if (
    !(await ask(
      fields.filter((f) => f.required),
      "required",
    ))
  ) {
    return undefined;
  }
  const optional = fields.filter((f) => !f.required);
  if (optional.length > 0) {
    const picked = await prompter.pickMany({
      title: `${toolName} — optional arguments`,
      placeHolder: "Pick the optional arguments to set, or press Enter to use the defaults",
      items: optional.map((f) => ({ label: f.name, description: describe(f), value: f.name })),
    });
    if (picked === undefined) {
      return undefined;
    }
    if (
      !(await ask(
        optional.filter((f) => picked.includes(f.name)),
        "optional",
      ))
    ) {
      return undefined;
    }
  }
  return args;
}
