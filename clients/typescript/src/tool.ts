import type { ArtifactRecord } from "./records.js";

/** What to hand back to the model after running its tag_artifact call: the record, or a refusal
 * the model can act on. The texts are those of the server's in-process ToolResult. */
export class ToolResult {
  constructor(
    readonly ok: boolean,
    readonly content: string,
    readonly record: ArtifactRecord | null = null,
    readonly created = false,
    readonly code: string | null = null,
    readonly details: unknown = null,
  ) {}

  static tagged(record: ArtifactRecord, created: boolean): ToolResult {
    const what = created ? "created" : "replaced the artifact with this key";
    return new ToolResult(true, `Tagged ${record.kind} artifact ${record.id}, version ${record.version} (${what}).`, record, created);
  }

  static refused(code: string, message: string, details: unknown): ToolResult {
    return new ToolResult(false, `Not tagged: ${message}`, null, false, code, details);
  }

  get isError(): boolean {
    return !this.ok;
  }

  /** An Anthropic Messages `tool_result` block. */
  anthropic(toolUseId: string): { type: "tool_result"; tool_use_id: string; content: string; is_error?: true } {
    const block: { type: "tool_result"; tool_use_id: string; content: string; is_error?: true } = {
      type: "tool_result",
      tool_use_id: toolUseId,
      content: this.content,
    };
    if (!this.ok) block.is_error = true;
    return block;
  }

  /** An OpenAI Chat Completions `tool` message. */
  openai(toolCallId: string): { role: "tool"; tool_call_id: string; content: string } {
    return { role: "tool", tool_call_id: toolCallId, content: this.content };
  }

  /** An OpenAI Responses API `function_call_output` item. */
  openaiResponses(callId: string): { type: "function_call_output"; call_id: string; output: string } {
    return { type: "function_call_output", call_id: callId, output: this.content };
  }
}

/** Whether a refusal of a tool call is the model's to fix (it names a field of the input). */
export function isModelError(status: number, details: unknown): boolean {
  const field = details && typeof details === "object" ? (details as { field?: unknown }).field : undefined;
  return (
    (status === 400 || status === 413) &&
    typeof field === "string" &&
    (field === "input" || field === "artifact" || field.startsWith("artifact."))
  );
}

/** The `key` of a model's call (its JSON text or the parsed object), or undefined. */
export function toolCallKey(input: unknown): unknown {
  let value = input;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  const artifact = value && typeof value === "object" ? (value as { artifact?: unknown }).artifact : undefined;
  return artifact && typeof artifact === "object" ? (artifact as { key?: unknown }).key ?? undefined : undefined;
}
