/** Every refusal or failure: the API's error envelope `{"error": {code, message, details?}}`. */
export class ArtifactsError extends Error {
  readonly code: string;
  readonly details: unknown;
  /** The HTTP status, or the websocket close code for a refused stream; undefined when no answer came. */
  readonly status: number | undefined;

  constructor(code: string, message: string, options: { details?: unknown; status?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ArtifactsError";
    this.code = code;
    this.details = options.details;
    this.status = options.status;
  }
}

/** The envelope of a refused answer (a sentence of our own when the body is not one). */
export async function errorFrom(response: Response): Promise<ArtifactsError> {
  const text = await response.text();
  try {
    const error = JSON.parse(text).error;
    if (error && typeof error.code === "string" && typeof error.message === "string") {
      return new ArtifactsError(error.code, error.message, { details: error.details, status: response.status });
    }
  } catch {
    // not JSON: fall through
  }
  return new ArtifactsError(
    `http_${response.status}`,
    `The server answered ${response.status} ${response.statusText}. ${text.slice(0, 200)}`.trim(),
    { status: response.status },
  );
}
