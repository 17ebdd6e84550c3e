import { spawnSync } from "node:child_process";
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { BatonError, ErrorCode } from "./errors.js";

/** This package's version: the binary and the addon must be the same version. */
export const VERSION: string = (
  JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8")) as { version: string }
).version;

/**
 * The platforms a release builds packages for (docs/node.md#releases), as
 * `<os>-<cpu>[-<libc>]`. Only `linux-x64-gnu` is built by this repository's CI.
 */
export const PLATFORMS = ["linux-x64-gnu", "linux-arm64-gnu", "linux-x64-musl", "darwin-arm64", "darwin-x64"] as const;

/** This process's platform key: `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`, ... */
export function platformKey(): string {
  const base = `${process.platform}-${process.arch}`;
  if (process.platform !== "linux") return base;
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return `${base}-${report?.header?.glibcVersionRuntime ? "gnu" : "musl"}`;
}

/** The npm package holding the `baton` binary for a platform. */
export const binaryPackage = (key = platformKey()): string => `@baton-engine/cli-${key}`;
/** The npm package holding the addon for a platform. */
export const addonPackage = (key = platformKey()): string => `@baton-engine/addon-${key}`;

const checked = new Map<string, string>();

/**
 * The `baton` binary to run: `explicit`, else `$BATON_BINARY`, else the platform package's.
 * It is run once with `--version`: a file that is missing, not executable, not a baton for
 * this platform, or another version than this package is a `BatonError` saying what to do.
 */
export function resolveBinary(explicit?: string): string {
  const fromEnv = process.env.BATON_BINARY;
  let path = explicit ?? (fromEnv ? fromEnv : undefined);
  const source = explicit ? "the `binary` option" : fromEnv ? "BATON_BINARY" : undefined;
  if (!path) {
    const pkg = binaryPackage();
    try {
      path = join(dirname(require.resolve(`${pkg}/package.json`)), "bin", "baton");
    } catch {
      throw new BatonError(
        ErrorCode.BinaryNotFound,
        `no baton binary for this platform (${platformKey()}): the package ${pkg} is not installed. ` +
          `npm installs it with @baton-engine/baton as an optional dependency on ${platformKey()}; ` +
          `reinstall without --omit=optional (or --no-optional), or set BATON_BINARY to a baton ${VERSION} binary. ` +
          `Release platforms: ${PLATFORMS.join(", ")}.`,
      );
    }
  }
  const seen = checked.get(path);
  if (seen !== undefined) return seen;
  checkBinary(path, source ?? binaryPackage());
  checked.set(path, path);
  return path;
}

/** The ELF machine numbers of the CPUs Node runs on. */
const ELF_MACHINE: Record<string, number> = { x64: 62, arm64: 183, ia32: 3, arm: 40, riscv64: 243, ppc64: 21, s390x: 22 };

/** What kind of program a file's first bytes say it is, when it is not one for this machine. */
export function foreignProgram(path: string): string | undefined {
  const head = Buffer.alloc(20);
  let n = 0;
  try {
    const fd = openSync(path, "r");
    try {
      n = readSync(fd, head, 0, 20, 0);
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined; // reported when it is run
  }
  if (n >= 20 && head.readUInt32BE(0) === 0x7f454c46) {
    const machine = head.readUInt16LE(18);
    const arch = Object.entries(ELF_MACHINE).find(([, m]) => m === machine)?.[0] ?? `machine ${machine}`;
    if (process.platform !== "linux") return `a Linux ${arch} program`;
    if (ELF_MACHINE[process.arch] !== machine) return `a Linux ${arch} program`;
    return undefined;
  }
  const magic = n >= 4 ? head.readUInt32BE(0) : 0;
  if ([0xfeedfacf, 0xcffaedfe, 0xcafebabe, 0xfeedface, 0xcefaedfe].includes(magic)) {
    return process.platform === "darwin" ? undefined : "a macOS program";
  }
  if (n >= 2 && head.toString("latin1", 0, 2) === "MZ") {
    return process.platform === "win32" ? undefined : "a Windows program";
  }
  return undefined;
}

function checkBinary(path: string, source: string): void {
  const foreign = foreignProgram(path);
  if (foreign) {
    throw new BatonError(
      ErrorCode.BinaryNotFound,
      `the baton binary ${path} (from ${source}) is ${foreign}, not one for this platform (${platformKey()}): ` +
        `install the package ${binaryPackage()} (an optional dependency of @baton-engine/baton), or point BATON_BINARY at a baton ${VERSION} built for this machine`,
    );
  }
  const r = spawnSync(path, ["--version"], { encoding: "utf8", timeout: 30_000 });
  const what = `the baton binary ${path} (from ${source})`;
  if (r.error) {
    const code = (r.error as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "does not exist"
        : code === "EACCES"
          ? "is not executable (chmod +x it, or reinstall the package)"
          : code === "ENOEXEC"
            ? `is not a program for this platform (${platformKey()}): install the package ${binaryPackage()} or build baton for this machine`
            : `cannot be run (${r.error.message})`;
    throw new BatonError(ErrorCode.BinaryNotFound, `${what} ${why}`);
  }
  const out = (r.stdout ?? "").trim();
  const m = /^baton (\S+)$/.exec(out);
  if (r.status !== 0 || !m) {
    throw new BatonError(
      ErrorCode.BinaryNotFound,
      `${what} is not a baton binary for this platform: \`--version\` ${
        r.status !== 0 ? `exited with ${r.status ?? r.signal}` : `printed ${JSON.stringify(out.slice(0, 200))}`
      }. Set BATON_BINARY to a baton ${VERSION} build, or reinstall ${binaryPackage()}.`,
    );
  }
  if (m[1] !== VERSION) {
    throw new BatonError(
      ErrorCode.VersionMismatch,
      `${what} is baton ${m[1]}, but @baton-engine/baton is ${VERSION}: install the same version of both ` +
        `(npm install @baton-engine/baton@${m[1]}, or ${binaryPackage()}@${VERSION}), or point BATON_BINARY at a baton ${VERSION} build`,
    );
  }
}

/** The native addon's interface (npm/addon/src/lib.rs). */
export interface NativeAddon {
  NativeEngine: new (
    policy: string,
    policyText?: string | null,
    templatesDir?: string | null,
    documentRoot?: string | null,
  ) => NativeEngine;
  check(spec: string): string;
  version(): string;
}

export interface NativeEngine {
  policy(): string;
  call(method: string, state: string, object: boolean, target: string | undefined | null, verbose: boolean, trace: boolean): string;
  callAsync(
    method: string,
    state: string,
    object: boolean,
    target: string | undefined | null,
    verbose: boolean,
    trace: boolean,
  ): Promise<string>;
}

let addon: NativeAddon | undefined;

/**
 * The in-process addon: `$BATON_ADDON` (a `.node` file), else the platform package's. A
 * missing or wrong-platform addon, or one of another version, is a `BatonError`.
 */
export function loadAddon(): NativeAddon {
  if (addon) return addon;
  const fromEnv = process.env.BATON_ADDON;
  const pkg = addonPackage();
  const what = fromEnv ? `the addon ${fromEnv} (from BATON_ADDON)` : `the addon package ${pkg}`;
  let loaded: NativeAddon;
  try {
    if (fromEnv && !/\.(c?js|node)$/.test(fromEnv)) {
      // A cargo build's `libbaton_node.so` (or `.dylib`): loaded as the `.node` file it is.
      const m = { exports: {} as NativeAddon };
      process.dlopen(m, resolve(fromEnv));
      loaded = m.exports;
    } else {
      loaded = require(fromEnv ? resolve(fromEnv) : pkg) as NativeAddon;
    }
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const missing = err.code === "MODULE_NOT_FOUND" && !fromEnv;
    throw new BatonError(
      ErrorCode.AddonNotFound,
      missing
        ? `no baton addon for this platform (${platformKey()}): the package ${pkg} is not installed. ` +
            `npm installs it with @baton-engine/baton as an optional dependency on ${platformKey()}; reinstall without ` +
            `--omit=optional, set BATON_ADDON to a baton ${VERSION} addon, or use the sidecar (BatonClient) instead.`
        : `${what} cannot be loaded on this platform (${platformKey()}): ${err.message.split("\n")[0]}. ` +
            `Install ${pkg}, set BATON_ADDON to an addon built for this machine, or use the sidecar (BatonClient).`,
    );
  }
  const v = typeof loaded.version === "function" ? loaded.version() : "unknown";
  if (v !== VERSION) {
    throw new BatonError(
      ErrorCode.VersionMismatch,
      `${what} is baton ${v}, but @baton-engine/baton is ${VERSION}: install the same version of both, or point BATON_ADDON at a baton ${VERSION} addon`,
    );
  }
  addon = loaded;
  return loaded;
}

/** Whether the addon loads on this machine (false instead of an error). */
export function hasAddon(): boolean {
  try {
    loadAddon();
    return true;
  } catch {
    return false;
  }
}
