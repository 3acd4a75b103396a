//! Throwaway site directories for the integration tests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("static-core-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    /// Sets a file's mtime, so tests never depend on clock granularity.
    pub fn set_mtime(&self, rel: &str, secs: u64, nanos: u32) {
        let file = fs::File::options().write(true).open(self.0.join(rel)).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub const INDEX_SCRIPT: &str = "document.title = 'hi';";
pub const INDEX_STYLE: &str = "body { margin: 0 }";

pub fn index_html() -> String {
    format!(
        "<!doctype html>\n<html><head><title>t</title><style>{INDEX_STYLE}</style></head>\n\
         <body><h1>hello</h1>{}<script>{INDEX_SCRIPT}</script></body></html>\n",
        "<p>padding so the page compresses well</p>\n".repeat(40)
    )
}

pub fn app_css() -> String {
    ".a { color: red; }\n".repeat(200)
}

/// A small site: index.html, x/y.css, logo.png (incompressible), a hidden file,
/// an empty directory, and a secret next to (outside) the site root.
pub fn make_site(root: &TempDir) -> PathBuf {
    root.write("site/index.html", index_html());
    root.write("site/x/y.css", app_css());
    root.write("site/app.js", "console.log('app');\n".repeat(100));
    root.write("site/logo.png", [0x89u8, b'P', b'N', b'G'].repeat(500));
    root.write("site/.env", "SECRET=1");
    root.write("site/robots.txt", "x");
    root.write("secret.txt", "TOP SECRET");
    fs::create_dir_all(root.join("site/emptydir")).unwrap();
    root.join("site")
}
