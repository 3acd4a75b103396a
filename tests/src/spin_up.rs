//! The real-Spin backend of [`crate::TestApp`]: `spin up` as a child process,
//! configured only through what Spin itself reads (flags, `SPIN_VARIABLE_*`,
//! a runtime-config file), so a test that passes here passes for a user.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ratatoskr_host::runtime_config::{RuntimeConfig, StoreLocation};
use ratatoskr_host::FilesMountStrategy;

use crate::TestAppOptions;

/// How long `spin up` may take to print `Serving http://…` (a cold wasmtime
/// cache compiles four components first).
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// A `spin up` process serving on 127.0.0.1, stopped when dropped.
pub struct SpinUp {
    pub addr: SocketAddr,
    child: Child,
    dir: tempfile::TempDir,
    _scratch: std::sync::Arc<tempfile::TempDir>,
}

impl SpinUp {
    pub async fn start(spin: &Path, options: TestAppOptions) -> Result<SpinUp> {
        let dir = tempfile::Builder::new().prefix("ratatoskr-spin-").tempdir()?;
        let runtime_config = dir.path().join("runtime-config.toml");
        std::fs::write(&runtime_config, runtime_config_toml(&options.runtime_config))?;
        let variables = redirected(&options.variables, &options.redirects);
        let manifest = std::path::absolute(&options.manifest)?;

        let out = dir.path().join("spin.out");
        // A port is free when picked, but a parallel test may bind it before
        // Spin does: Spin then exits at once saying so, and we pick another.
        let mut attempts = 0;
        let (addr, child) = loop {
            attempts += 1;
            let addr = free_port()?;
            let mut command = Command::new(spin);
            command
                .arg("up")
                .arg("--from")
                .arg(&manifest)
                .arg("--listen")
                .arg(addr.to_string())
                .arg("--runtime-config-file")
                .arg(&runtime_config)
                .arg("--log-dir")
                .arg(dir.path().join("logs"))
                // Nothing of a test run lands in the repo's `.spin/`.
                .arg("--state-dir")
                .arg(dir.path().join("state"));
            match &options.files {
                FilesMountStrategy::Copy => {}
                FilesMountStrategy::CopyInto(temp) => {
                    command.arg("--temp").arg(temp);
                }
                FilesMountStrategy::Direct => {
                    command.arg("--direct-mounts");
                }
            }
            // Only the test's variables: none from this process's environment, no `.env`.
            for (name, _) in std::env::vars() {
                if name.starts_with("SPIN_VARIABLE_") {
                    command.env_remove(name);
                }
            }
            for (name, value) in &variables {
                command.env(format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase()), value);
            }
            let output = std::fs::File::create(&out)?;
            command.current_dir(dir.path()).stdin(Stdio::null()).stdout(output.try_clone()?).stderr(output);
            let mut child = command.spawn().with_context(|| format!("starting {}", spin.display()))?;
            match wait_until_serving(&mut child, &out, &format!("Serving http://{addr}")).await {
                Ok(()) => break (addr, child),
                Err(_) if attempts < 5 && read(&out).contains("is already in use") => continue,
                Err(error) => {
                    stop(&mut child);
                    return Err(error);
                }
            }
        };
        Ok(SpinUp { addr, child, dir, _scratch: options.scratch })
    }

    fn output(&self) -> String {
        read(&self.dir.path().join("spin.out"))
    }

    /// Spin's own output and every component's stdio log.
    pub fn log(&self) -> String {
        let mut all = self.output();
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("logs")) {
            for entry in entries.flatten() {
                all.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
        all
    }
}

impl Drop for SpinUp {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Waits for `spin up` to print that it serves on `addr`.
/// Waits for a server child to print `needle` (its "serving" line) to `out`.
pub(crate) async fn wait_until_serving(child: &mut Child, out: &Path, needle: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        if read(out).contains(needle) {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!("the server exited ({status}) before serving:\n{}", read(out));
        }
        if started.elapsed() > START_TIMEOUT {
            bail!("the server did not serve within {START_TIMEOUT:?}:\n{}", read(out));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// SIGINT lets Spin remove its working copy; SIGKILL if it lingers.
fn stop(child: &mut Child) {
    stop_target(child, &child.id().to_string());
}

/// SIGINT to a child that leads its own process group and to every process
/// it started (`jco serve` runs its server in a second node), SIGKILL to the
/// group if it lingers.
pub(crate) fn stop_group(child: &mut Child) {
    let group = format!("-{}", child.id());
    stop_target(child, &group);
    let _ = Command::new("kill").arg("-KILL").arg("--").arg(&group).stderr(Stdio::null()).status();
}

fn stop_target(child: &mut Child, target: &str) {
    let _ = Command::new("kill").arg("-INT").arg("--").arg(target).status();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A port nothing listens on right now (bound, then released for Spin).
pub(crate) fn free_port() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

fn runtime_config_toml(config: &RuntimeConfig) -> String {
    let mut toml = String::new();
    let sections = [("key_value_store", &config.key_value_stores), ("sqlite_database", &config.sqlite_databases)];
    for (section, stores) in sections {
        for (label, location) in stores {
            toml.push_str(&format!("[{section}.{label}]\ntype = \"spin\"\n"));
            // No path: Spin keeps the store in memory, as the host does.
            if let StoreLocation::File(path) = location {
                toml.push_str(&format!("path = {:?}\n", path.display().to_string()));
            }
        }
    }
    if !config.connection_pooling {
        toml.push_str("[outbound_http]\nconnection_pooling = false\n");
    }
    toml
}

/// Spin cannot reroute an origin as the host's test hook does, so a redirect of
/// `name:port` becomes what a user would configure: every variable naming
/// `http://name[:port]` names the mock's address instead (URLs and the
/// `allowed_outbound_hosts` origins move together).
pub(crate) fn redirected(
    variables: &HashMap<String, String>,
    redirects: &HashMap<String, SocketAddr>,
) -> HashMap<String, String> {
    variables
        .iter()
        .map(|(name, value)| {
            let mut value = value.clone();
            for (authority, addr) in redirects {
                let mut spellings = vec![format!("http://{authority}")];
                if let Some(host) = authority.strip_suffix(":80") {
                    spellings.push(format!("http://{host}"));
                }
                for from in spellings {
                    value = replace_origin(&value, &from, &format!("http://{addr}"));
                }
            }
            (name.clone(), value)
        })
        .collect()
}

/// Replaces `from` where it is a whole origin: followed by the end, `/`, `?` or `#`.
fn replace_origin(value: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find(from) {
        let after = &rest[at + from.len()..];
        out.push_str(&rest[..at]);
        if after.is_empty() || after.starts_with(['/', '?', '#']) {
            out.push_str(to);
        } else {
            out.push_str(from);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The spin binary the lane runs, from `SPIN_BIN`.
pub fn spin_bin() -> Option<PathBuf> {
    std::env::var_os("SPIN_BIN").map(PathBuf::from).filter(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_rewrite_whole_origins_only() {
        let vars = HashMap::from([
            ("a".to_string(), "http://upstream.test".to_string()),
            ("b".to_string(), "http://upstream.test/worldtree/affect".to_string()),
            ("c".to_string(), "http://upstream.testing/x".to_string()),
            ("d".to_string(), "https://upstream.test".to_string()),
        ]);
        let redirects = HashMap::from([("upstream.test:80".to_string(), "127.0.0.1:4242".parse().unwrap())]);
        let out = redirected(&vars, &redirects);
        assert_eq!(out["a"], "http://127.0.0.1:4242");
        assert_eq!(out["b"], "http://127.0.0.1:4242/worldtree/affect");
        assert_eq!(out["c"], "http://upstream.testing/x");
        assert_eq!(out["d"], "https://upstream.test");
    }

    #[test]
    fn runtime_config_keeps_memory_stores_pathless() {
        let mut config = RuntimeConfig::in_memory();
        config.sqlite_databases.insert("default".into(), StoreLocation::File("/tmp/x.db".into()));
        let toml = runtime_config_toml(&config);
        assert!(toml.contains("[key_value_store.default]\ntype = \"spin\"\n["), "{toml}");
        assert!(toml.contains("[sqlite_database.default]\ntype = \"spin\"\npath = \"/tmp/x.db\"\n"), "{toml}");
        assert!(!toml.contains("outbound_http"), "pooling on is Spin's default: {toml}");
        config.connection_pooling = false;
        assert!(runtime_config_toml(&config).ends_with("[outbound_http]\nconnection_pooling = false\n"));
    }
}
