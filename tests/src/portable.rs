//! The portable console's backends of [`crate::TestApp`]:
//! `ratatoskr_console.wasm` under `wasmtime serve` or `jco serve`, configured
//! only through what a user sets (`RATATOSKR_<VARIABLE>`, see
//! `console_api::env`), with the upstream URLs moved to the test's mocks as
//! in the real-Spin lane. The manifest of the options is not read: the
//! portable console is the site and `/api` in one component.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};
use console_api::env::{env_name, VARIABLES};

use crate::spin_up::{free_port, read, redirected, stop_group, wait_until_serving};
use crate::{require_wasm, Runtime, TestAppOptions};

/// Prewarmed request workers of `jco serve --isolate-requests`: a few, so a
/// start stays short, but more than the streams a test holds open at once.
const JCO_WORKERS: &str = "4";

/// A `wasmtime serve` or `jco serve` process serving the portable console on
/// 127.0.0.1, stopped (with everything it started) when dropped.
pub struct Served {
    pub addr: SocketAddr,
    child: Child,
    dir: tempfile::TempDir,
}

/// `RATATOSKR_<NAME>` for each of the test's variables the console reads,
/// with redirected origins.
pub fn console_env(options: &TestAppOptions) -> Vec<(String, String)> {
    let variables = redirected(&options.variables, &options.redirects);
    let mut env: Vec<(String, String)> =
        VARIABLES.iter().filter_map(|(_, app, _)| Some((env_name(app), variables.get(*app)?.clone()))).collect();
    env.sort();
    env
}

impl Served {
    pub async fn start(runtime: &Runtime, options: &TestAppOptions) -> Result<Served> {
        let wasm = require_wasm("ratatoskr_console.wasm");
        let env = console_env(options);
        let dir = tempfile::Builder::new().prefix("ratatoskr-portable-").tempdir()?;
        let out = dir.path().join("server.out");
        let mut attempts = 0;
        let (addr, child) = loop {
            attempts += 1;
            let addr = free_port()?;
            let (mut command, serving) = command(runtime, &wasm, addr, dir.path())?;
            // Only the test's configuration: none of this process's RATATOSKR_*.
            for (name, _) in std::env::vars() {
                if name.starts_with(console_api::env::PREFIX) {
                    command.env_remove(name);
                }
            }
            command.envs(env.iter().map(|(k, v)| (k, v)));
            let output = std::fs::File::create(&out)?;
            command.stdin(Stdio::null()).stdout(output.try_clone()?).stderr(output).process_group(0);
            let mut child = command.spawn().with_context(|| format!("starting {runtime:?}"))?;
            match wait_until_serving(&mut child, &out, &serving).await {
                Ok(()) => break (addr, child),
                Err(_) if attempts < 5 && read(&out).contains("in use") => {
                    stop_group(&mut child);
                    continue;
                }
                Err(error) => {
                    stop_group(&mut child);
                    return Err(error);
                }
            }
        };
        Ok(Served { addr, child, dir })
    }

    /// Everything the runtime and the component wrote.
    pub fn log(&self) -> String {
        read(&self.dir.path().join("server.out"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        stop_group(&mut self.child);
    }
}

/// The command that serves `wasm` on `addr`, and the line it prints once it does.
/// The variables are inherited by name, as the commands of docs/runtimes.md pass keys
/// (never on a command line).
fn command(runtime: &Runtime, wasm: &Path, addr: SocketAddr, scratch: &Path) -> Result<(Command, String)> {
    Ok(match runtime {
        Runtime::WasmtimeServe(bin) => {
            let mut command = Command::new(bin);
            command.arg("serve").arg("-Scli").arg("--addr").arg(addr.to_string());
            for (_, app, _) in VARIABLES {
                command.arg("--env").arg(env_name(app));
            }
            command.arg(wasm);
            (command, format!("Serving HTTP on http://{addr}/"))
        }
        Runtime::Jco(bin) => {
            let mut command = Command::new("node");
            command
                .arg(bin)
                .arg("serve")
                .arg("--isolate-requests")
                .arg("--isolate-worker-pool-size")
                .arg(JCO_WORKERS)
                .arg("--host")
                .arg("127.0.0.1")
                .arg("--port")
                .arg(addr.port().to_string())
                // Its transpiled output in the test's scratch directory, gone with it.
                .arg("--jco-dir")
                .arg(scratch.join("jco"))
                .arg(wasm);
            (command, format!("Server listening @ 127.0.0.1:{}", addr.port()))
        }
        other => anyhow::bail!("{other:?} does not serve the portable console"),
    })
}

/// `jco` from `JCO_BIN`, else the pinned one that `npm ci` installs in tests/runtimes.
pub fn jco_bin() -> Option<PathBuf> {
    let pinned = crate::repo_root().join("tests/runtimes/node_modules/@bytecodealliance/jco/dist/jco.js");
    std::env::var_os("JCO_BIN").map(PathBuf::from).or(Some(pinned)).filter(|p| p.is_file())
}

/// The wasmtime CLI from `WASMTIME_BIN`.
pub fn wasmtime_bin() -> Option<PathBuf> {
    std::env::var_os("WASMTIME_BIN").map(PathBuf::from).filter(|p| p.is_file())
}

/// A manifest that runs only the portable console, in the repo's host or
/// under `spin up`, configured as on any runtime: by its environment. Its
/// allow-list lets every origin out, so that the component's own holds.
pub fn manifest(options: &TestAppOptions) -> Result<PathBuf> {
    let wasm = require_wasm("ratatoskr_console.wasm");
    let mut toml = format!(
        "spin_manifest_version = 2\n[application]\nname = \"ratatoskr-console\"\n\
         [[trigger.http]]\nroute = \"/...\"\ncomponent = \"console\"\n\
         [component.console]\nsource = {:?}\nallowed_outbound_hosts = [\"http://*:*\", \"https://*:*\"]\n\
         [component.console.environment]\n",
        wasm.display().to_string()
    );
    for (name, value) in console_env(options) {
        toml.push_str(&format!("{name} = {value:?}\n"));
    }
    let path = options.scratch.path().join("portable.toml");
    std::fs::write(&path, toml)?;
    Ok(path)
}
