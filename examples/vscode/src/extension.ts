// The VS Code client: starts `baton lsp` (setting `baton.path`, default `baton` on the PATH)
// for baton policies (*.policy) and YAML policy test files. Everything the editor shows comes
// from the server; see docs/editor.md.
import { workspace, type ExtensionContext } from "vscode";
import {
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";

let client: LanguageClient | undefined;

export async function activate(context: ExtensionContext): Promise<void> {
  const config = workspace.getConfiguration("baton");
  const command = config.get<string>("path", "baton");
  const debounce = config.get<number>("debounceMs", 150);
  const run = { command, args: ["lsp", "--debounce-ms", String(debounce)] };
  const serverOptions: ServerOptions = { run, debug: run };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { language: "baton-policy" },
      // Policy test files are YAML; the server answers only for files with `policy:` and
      // `cases:` at the top level.
      { scheme: "file", language: "yaml" },
    ],
  };
  client = new LanguageClient("baton", "baton policy", serverOptions, clientOptions);
  context.subscriptions.push(client);
  await client.start();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
