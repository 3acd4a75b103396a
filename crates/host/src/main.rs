//! `ratatoskr-host up`: serve a Spin application from its spin.toml.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use ratatoskr_host::runtime_config::RuntimeConfig;
use ratatoskr_host::variables::VariableSources;
use ratatoskr_host::{App, AppOptions, FilesMountStrategy, LogSink};

#[derive(Parser)]
#[command(about = "Runs a Spin application (spin.toml) on wasmtime, as `spin up` does")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the application.
    Up {
        /// The application manifest.
        #[arg(short = 'f', long = "from", default_value = "spin.toml")]
        manifest: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
        /// Runtime configuration (key-value stores, databases).
        #[arg(long = "runtime-config-file")]
        runtime_config: Option<PathBuf>,
        /// Set an application variable: NAME=VALUE (beats SPIN_VARIABLE_*).
        #[arg(long = "variable", value_parser = parse_variable)]
        variables: Vec<(String, String)>,
        /// Mount `files` directories in place instead of copying them at start-up
        /// (edits are then seen without a restart), as `spin up --direct-mounts`.
        #[arg(long = "direct-mounts")]
        direct_mounts: bool,
        /// Working directory for the copied files (default: a fresh `spinup-*` temp dir).
        #[arg(long = "temp", alias = "tmp")]
        temp: Option<PathBuf>,
    },
}

fn parse_variable(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| "expected NAME=VALUE".to_string())
}

#[tokio::main]
async fn main() -> Result<()> {
    let Command::Up { manifest, listen, runtime_config, variables, direct_mounts, temp } = Cli::parse().command;
    let files = match (direct_mounts, temp) {
        (true, _) => FilesMountStrategy::Direct,
        (false, Some(dir)) => FilesMountStrategy::CopyInto(dir),
        (false, None) => FilesMountStrategy::Copy,
    };
    let app_dir =
        manifest.parent().map(PathBuf::from).filter(|p| !p.as_os_str().is_empty()).unwrap_or_else(|| ".".into());
    let runtime_config = match runtime_config {
        Some(path) => RuntimeConfig::from_file(&path, &app_dir)?,
        None => RuntimeConfig::defaults(&app_dir),
    };
    let mut sources = VariableSources::from_process(&app_dir)?;
    sources.explicit = variables.into_iter().collect::<HashMap<_, _>>();

    let app = App::load(AppOptions {
        manifest,
        runtime_config,
        variables: sources,
        redirects: HashMap::new(),
        log: LogSink::Stderr,
        files,
    })?;
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    eprintln!("Serving http://{}", listener.local_addr()?);
    app.serve(listener, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
