/**
 * A real daphne of the server for these tests, started by them: the server's interpreter runs
 * `python -m tests.kit_server` from the server checkout (ARTIFACTS_SERVER_ROOT, default the
 * repository this kit sits in; ARTIFACTS_SERVER_PYTHON, default its .venv/bin/python). It prints
 * one JSON line (URLs and secrets) and stops when its stdin closes, i.e. when this process ends.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface Served {
  base: string;
  ws: string;
  port: number;
  keys: { reviewer: string; notes: string; tiny: string; declared: string };
  userToken: string;
  staffToken: string;
  stop(): Promise<void>;
}

// build-test/test/server.js -> the kit -> clients -> the repository
const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = process.env.ARTIFACTS_SERVER_ROOT ?? resolve(here, "..", "..", "..", "..");
const PYTHON = process.env.ARTIFACTS_SERVER_PYTHON ?? join(ROOT, ".venv", "bin", "python");

/** `env`: variables for this server on top of this process's (a limit a test needs lower). */
export async function startServer(env: Record<string, string> = {}): Promise<Served> {
  if (!existsSync(PYTHON)) {
    throw new Error(
      `These tests need the server: no interpreter at ${PYTHON}. Run the server's bin/test once ` +
        "(it makes .venv), or set ARTIFACTS_SERVER_PYTHON and ARTIFACTS_SERVER_ROOT.",
    );
  }
  const child = spawn(PYTHON, ["-m", "tests.kit_server"], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  const lines = createInterface({ input: child.stdout! });
  const first = await Promise.race([
    new Promise<string>((done) => lines.once("line", done)),
    exited.then((code) => {
      throw new Error(`the test server exited with ${code} before it was ready (its output is above)`);
    }),
  ]);
  lines.close();
  const info = JSON.parse(first);
  return {
    ...info,
    async stop() {
      child.stdin!.end(); // the server stops daphne and cleans up
      const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
