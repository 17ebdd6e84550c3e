// End-to-end test of `baton lsp` from Node through the standard LSP client library
// (vscode-languageserver-protocol, what vscode-languageclient is built on): open a policy with
// an error, receive the diagnostic with its range, apply the suggested code action, and see the
// diagnostics clear. Run: `npm ci && npm test` (BATON_BIN points at the binary; default
// ../../target/debug/baton).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import {
  createProtocolConnection,
  StreamMessageReader,
  StreamMessageWriter,
  InitializeRequest,
  InitializedNotification,
  DidOpenTextDocumentNotification,
  DidChangeTextDocumentNotification,
  PublishDiagnosticsNotification,
  CodeActionRequest,
  HoverRequest,
  CompletionRequest,
  ShutdownRequest,
  ExitNotification,
  type PublishDiagnosticsParams,
  type CodeAction,
  type CompletionItem,
  type Diagnostic,
  type TextEdit,
} from "vscode-languageserver-protocol/node";
import { checkGrammar } from "./grammar";

const here = resolve(__dirname, "../..");
const bin = resolve(here, process.env.BATON_BIN ?? "../../target/debug/baton");

const POLICY = `policy "team" {}

strategy {
  no_handoff when target.runs_since_lastseen == 0
  full_new otherwise
}
`;

async function main(): Promise<void> {
  await checkGrammar();
  console.log("ok - the TextMate grammar scopes each kind of token");

  const work = mkdtempSync(join(tmpdir(), "baton-vscode-e2e-"));
  const file = join(work, "team.policy");
  writeFileSync(file, POLICY);
  const uri = pathToFileURL(file).toString();

  const child = spawn(bin, ["lsp", "--debounce-ms", "50"], { stdio: ["pipe", "pipe", "inherit"] });
  child.on("error", (e) => {
    console.error(`not ok - cannot start ${bin}: ${e.message} (build it, or set BATON_BIN)`);
    process.exit(1);
  });
  const conn = createProtocolConnection(
    new StreamMessageReader(child.stdout!),
    new StreamMessageWriter(child.stdin!),
  );
  // Diagnostics by document version, as the server publishes them.
  const waiting = new Map<number, (d: Diagnostic[]) => void>();
  const received = new Map<number, Diagnostic[]>();
  conn.onNotification(PublishDiagnosticsNotification.type, (p: PublishDiagnosticsParams) => {
    if (p.uri !== uri || p.version === undefined) return;
    received.set(p.version, p.diagnostics);
    waiting.get(p.version)?.(p.diagnostics);
  });
  const diagnostics = (version: number): Promise<Diagnostic[]> =>
    new Promise((ok, fail) => {
      const have = received.get(version);
      if (have) return ok(have);
      const timer = setTimeout(() => fail(new Error(`no diagnostics for version ${version}`)), 30_000);
      waiting.set(version, (d) => {
        clearTimeout(timer);
        ok(d);
      });
    });
  conn.listen();

  const init = await conn.sendRequest(InitializeRequest.type, {
    processId: process.pid,
    rootUri: pathToFileURL(work).toString(),
    capabilities: {},
  });
  assert.equal(init.serverInfo?.name, "baton");
  assert.equal(init.capabilities.codeActionProvider, true);
  await conn.sendNotification(InitializedNotification.type, {});
  console.log("ok - initialize");

  await conn.sendNotification(DidOpenTextDocumentNotification.type, {
    textDocument: { uri, languageId: "baton-policy", version: 1, text: POLICY },
  });
  const first = await diagnostics(1);
  assert.equal(first.length, 1, JSON.stringify(first));
  const d = first[0];
  assert.equal(d.message, "unknown fact `target.runs_since_lastseen`");
  assert.equal(d.code, "baton::check::unknown_fact");
  assert.equal(d.severity, 1);
  assert.deepEqual(d.range, { start: { line: 3, character: 18 }, end: { line: 3, character: 44 } });
  console.log("ok - the diagnostic arrives on open with its range, code and severity");

  const hover = await conn.sendRequest(HoverRequest.type, {
    textDocument: { uri },
    position: { line: 4, character: 4 },
  });
  const contents = hover?.contents as { value: string } | undefined;
  assert.match(contents?.value ?? "", /^Strategy `full_new`: Create a new provider thread/);
  const completion = (await conn.sendRequest(CompletionRequest.type, {
    textDocument: { uri },
    position: { line: 3, character: 25 },
  })) as CompletionItem[];
  assert.ok(completion.some((c) => c.label === "target.runs_since_last_seen"));
  console.log("ok - hover and completion answer");

  const actions = (await conn.sendRequest(CodeActionRequest.type, {
    textDocument: { uri },
    range: d.range,
    context: { diagnostics: first },
  })) as CodeAction[];
  assert.equal(actions.length, 1);
  assert.equal(actions[0].title, "Replace with `target.runs_since_last_seen`");
  const edits: TextEdit[] = actions[0].edit?.changes?.[uri] ?? [];
  assert.equal(edits.length, 1);
  console.log("ok - the code action suggests the fix");

  await conn.sendNotification(DidChangeTextDocumentNotification.type, {
    textDocument: { uri, version: 2 },
    contentChanges: edits.map((e) => ({ range: e.range, text: e.newText })),
  });
  assert.deepEqual(await diagnostics(2), []);
  console.log("ok - after the edit the diagnostics clear");

  await conn.sendRequest(ShutdownRequest.type);
  await conn.sendNotification(ExitNotification.type);
  const code = await new Promise<number | null>((ok) => child.on("exit", ok));
  assert.equal(code, 0);
  conn.dispose();
  rmSync(work, { recursive: true, force: true });
  console.log("ok - shutdown");
}

main().catch((e) => {
  console.error(`not ok - ${e instanceof Error ? e.stack : e}`);
  process.exit(1);
});
