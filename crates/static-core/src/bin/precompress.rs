//! `precompress <site-dir> <out-dir>`: brotli/gzip variants and sidecars for the
//! static-file component. Only stale outputs are rewritten.

use std::path::PathBuf;
use std::process::ExitCode;

use static_core::precompress::{precompress_dir, Outcome};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [site_dir, out_dir] = args.as_slice() else {
        eprintln!("usage: precompress <site-dir> <out-dir>");
        return ExitCode::from(2);
    };
    let (site_dir, out_dir) = (PathBuf::from(site_dir), PathBuf::from(out_dir));
    let report = match precompress_dir(&site_dir, &out_dir) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("precompress: {}: {error}", site_dir.display());
            return ExitCode::FAILURE;
        }
    };

    let mut written = 0;
    for file in &report.files {
        match &file.outcome {
            Outcome::UpToDate => {}
            Outcome::Written { source_size, variants } => {
                written += 1;
                let variants: Vec<String> =
                    variants.iter().map(|(encoding, size)| format!("{} {size}", encoding.sidecar_name())).collect();
                let variants = if variants.is_empty() { "identity only".to_owned() } else { variants.join(", ") };
                println!("wrote {}: {source_size} bytes -> {variants}", file.rel);
            }
            Outcome::SkippedUnservable => {
                println!("skipped {}: the component refuses this name (hidden or non-ASCII?)", file.rel)
            }
        }
    }
    for rel in &report.removed {
        println!("removed {rel}: its source is gone");
    }
    let up_to_date = report.files.iter().filter(|f| f.outcome == Outcome::UpToDate).count();
    println!(
        "precompress: {} files, {written} written, {up_to_date} up to date, {} removed -> {}",
        report.files.len(),
        report.removed.len(),
        out_dir.display()
    );
    ExitCode::SUCCESS
}
