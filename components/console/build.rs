//! Builds the site into the component: `static/` precompressed into OUT_DIR
//! (the step scripts/lib.sh runs for the Spin app) and written out as the
//! `static_core::Embedded` that src/lib.rs includes.

use std::path::PathBuf;

fn main() {
    let site = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../static");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed={}", site.display());
    let embedded =
        static_core::precompress::embed_source(&site, &out.join("precompressed")).expect("precompressing static/");
    std::fs::write(out.join("site.rs"), embedded).expect("writing the embedded site");
}
