//! A component's `files`, mounted the way `spin up` (Spin 4.0.2) mounts them.
//!
//! By default Spin copies every component's files into a per-run temporary
//! directory (`<working dir>/assets/<component id>/`) at start-up and mounts
//! that copy at `/`; `--direct-mounts` mounts the source directories in place
//! instead. The copy is what users run, and it changes what a component can
//! rely on (modification times are new, edits made while the app runs are not
//! seen), so it is imitated rule for rule, quirks included; see
//! `spinframework/spin` `crates/loader/src/local.rs` at v4.0.2.

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};

use crate::manifest::FileMount;

/// How `files` reach the guests (`spin up` default, or `--direct-mounts`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FilesMountStrategy {
    /// Copy into `<temp>/assets/<id>/` at start-up; `temp` is `--temp`, else a
    /// fresh `spinup-*` directory removed when the app is dropped.
    #[default]
    Copy,
    /// Copy into a working directory the caller chose (`--temp DIR`), kept.
    CopyInto(PathBuf),
    /// Mount each source directory where it is (`--direct-mounts`).
    Direct,
}

/// Where a mount lives on the host and at which guest path it appears.
pub type Mount = (PathBuf, String);

/// Where one app's mounts come from, as resolved at load.
#[derive(Clone, Copy, Debug)]
pub enum Mounting<'a> {
    /// Copies under `assets_root` (`<working dir>/assets`).
    Copy { assets_root: &'a Path },
    /// Sources mounted in place. Spin 4.0.2 checks a source against the app
    /// directory but mounts it resolved against the directory `spin up` runs in
    /// (`resolve_direct_mount` canonicalises the bare `source`), so a run from
    /// elsewhere fails every request of the component; imitated, not fixed.
    Direct { run_dir: &'a Path },
}

/// The mounts of one component.
pub fn component_mounts(
    mounting: Mounting<'_>,
    app_root: &Path,
    component_id: &str,
    files: &[FileMount],
    exclude_files: &[String],
) -> Result<Vec<Mount>> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let app_root = std::path::absolute(app_root).with_context(|| format!("resolving {}", app_root.display()))?;
    let assets_root = match mounting {
        Mounting::Copy { assets_root } => assets_root,
        Mounting::Direct { run_dir } => {
            ensure!(exclude_files.is_empty(), "Cannot load a component with `exclude_files` using --direct-mounts");
            return files
                .iter()
                .map(|mount| {
                    let (source, destination) = match mount {
                        FileMount::Pattern(pattern) => (pattern, pattern),
                        FileMount::Placement { source, destination } => (source, destination),
                    };
                    ensure!(
                        app_root.join(source).is_dir(),
                        "Only directory mounts are supported with `--direct-mounts`; {source:?} is not a directory."
                    );
                    Ok((run_dir.join(source), destination.clone()))
                })
                .collect();
        }
    };
    let copier = Copier {
        app_root: &app_root,
        assets_root,
        exclude: exclude_files
            .iter()
            .map(|p| glob::Pattern::new(p).with_context(|| format!("Invalid exclude_files glob pattern {p:?}")))
            .collect::<Result<_>>()?,
    };
    let component_root = assets_root.join(component_id);
    for mount in files {
        copier.copy_mount(mount, &component_root)?;
    }
    // Spin mounts the whole copy at the guest's root.
    std::fs::create_dir_all(&component_root)?;
    Ok(vec![(component_root, "/".to_owned())])
}

struct Copier<'a> {
    app_root: &'a Path,
    assets_root: &'a Path,
    exclude: Vec<glob::Pattern>,
}

impl Copier<'_> {
    fn copy_mount(&self, mount: &FileMount, dest_root: &Path) -> Result<()> {
        match mount {
            FileMount::Pattern(pattern) => self.copy_glob_or_path(pattern, dest_root),
            FileMount::Placement { source, destination } => {
                let dest = dest_root.join(destination.trim_start_matches('/'));
                self.copy_file_or_directory(Path::new(source), &dest, destination)
            }
        }
    }

    fn copy_glob_or_path(&self, glob_or_path: &str, dest_root: &Path) -> Result<()> {
        if glob_or_path == ".." || glob_or_path.ends_with("/..") {
            bail!("A file pattern can't end in a parent directory path (..)");
        }
        if glob_or_path == "." || glob_or_path.ends_with("/.") {
            bail!("A file pattern can't end in a current directory path (.)");
        }
        let path = self.app_root.join(glob_or_path);
        if path.exists() {
            let dest = dest_root.join(glob_or_path);
            if path.is_dir() {
                // Spin's quirk, kept: the directory's app-relative path is joined
                // twice, so `files = ["d"]` puts d/x at /d/d/x in the guest.
                self.copy_glob(&path.join("**/*"), self.app_root, &dest)
            } else {
                self.copy_single_file(&path, &dest, glob_or_path)
            }
        } else if glob::Pattern::escape(glob_or_path) != glob_or_path {
            self.copy_glob(&path, self.app_root, dest_root)
        } else {
            bail!("{glob_or_path:?} does not exist and doesn't appear to be a glob pattern")
        }
    }

    fn copy_file_or_directory(&self, src: &Path, dest: &Path, guest_dest: &str) -> Result<()> {
        let src_path = self.app_root.join(src);
        let meta = std::fs::metadata(&src_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow::anyhow!("File or directory {} does not exist", src.display())
            }
            _ => anyhow::Error::from(e).context(format!("invalid file mount source {}", src.display())),
        })?;
        if meta.is_dir() {
            self.copy_glob(&src_path.join("**/*"), &src_path, dest)
        } else {
            self.copy_single_file(&src_path, dest, guest_dest)
        }
    }

    /// Files matching `pattern`, placed at `dest_root` + their path below `src_prefix`.
    fn copy_glob(&self, pattern: &Path, src_prefix: &Path, dest_root: &Path) -> Result<()> {
        let pattern = pattern.to_str().with_context(|| format!("invalid (non-utf8) file pattern {pattern:?}"))?;
        let paths = glob::glob(pattern).with_context(|| format!("Failed to resolve glob pattern {pattern:?}"))?;
        std::fs::create_dir_all(dest_root)
            .with_context(|| format!("Failed to create parent directory {}", dest_root.display()))?;
        for entry in paths {
            let src = entry?;
            // Directories come from the files below them; empty ones are not copied.
            if !src.is_file() {
                continue;
            }
            // Spin's check is lexical, so `../x` passes it and lands outside the
            // component's copy; here it fails the load, so no copy can escape.
            let inside = src
                .strip_prefix(self.app_root)
                .ok()
                .filter(|rel| !rel.components().any(|c| c == std::path::Component::ParentDir));
            let Some(app_relative) = inside else {
                bail!("{pattern} cannot be mapped because it is outside the application directory. Files must be within the application directory.");
            };
            if self.exclude.iter().any(|p| p.matches_path(app_relative)) {
                continue;
            }
            let relative = src.strip_prefix(src_prefix)?;
            self.copy_single_file(&src, &dest_root.join(relative), &relative.to_string_lossy())?;
        }
        Ok(())
    }

    fn copy_single_file(&self, src: &Path, dest: &Path, guest_dest: &str) -> Result<()> {
        ensure!(src.starts_with(self.app_root), "{} is outside the application directory", src.display());
        ensure!(dest.starts_with(self.assets_root), "{guest_dest:?} is not a valid destination");
        let parent = dest.parent().context("destination has no parent")?;
        std::fs::create_dir_all(parent)
            .with_context(|| format!("Failed to create parent directory {}", parent.display()))?;
        std::fs::copy(src, dest).map_err(|e| {
            let is_dir_like = guest_dest.ends_with('/') || guest_dest.ends_with('.') || guest_dest.ends_with("..");
            let context = format!("Failed to copy {} to working path {}", src.display(), dest.display());
            if is_dir_like || e.kind() == std::io::ErrorKind::NotFound {
                anyhow::anyhow!("{guest_dest:?} is not a valid destination file name").context(context)
            } else {
                anyhow::Error::from(e).context(format!("{context} (for destination path {guest_dest:?})"))
            }
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree(tempfile::TempDir);

    impl Tree {
        fn new() -> Tree {
            let tree = Tree(tempfile::tempdir().unwrap());
            for (rel, text) in [
                ("app/d/a.txt", "A"),
                ("app/d/c.md", "C"),
                ("app/d/sub/b.txt", "B"),
                ("app/d/.hidden", "H"),
                ("app/top.txt", "T"),
                ("outside.txt", "O"),
            ] {
                let path = tree.0.path().join(rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            tree
        }

        fn app(&self) -> PathBuf {
            self.0.path().join("app")
        }

        fn assets(&self) -> PathBuf {
            self.0.path().join("work/assets")
        }

        /// Copies and lists what the guest would see, as `path=content`.
        fn copy(&self, files: &[FileMount], exclude: &[&str]) -> Result<Vec<String>> {
            let exclude: Vec<String> = exclude.iter().map(|s| s.to_string()).collect();
            let _ = std::fs::remove_dir_all(self.assets());
            let assets = self.assets();
            let mounts = component_mounts(Mounting::Copy { assets_root: &assets }, &self.app(), "c", files, &exclude)?;
            assert_eq!(mounts, vec![(self.assets().join("c"), "/".to_owned())]);
            let mut seen = Vec::new();
            list(&mounts[0].0, &mounts[0].0, &mut seen);
            seen.sort();
            Ok(seen)
        }
    }

    fn list(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = format!("/{}", path.strip_prefix(root).unwrap().display());
            if path.is_dir() {
                out.push(format!("{rel}/"));
                list(root, &path, out);
            } else {
                out.push(format!("{rel}={}", std::fs::read_to_string(&path).unwrap()));
            }
        }
    }

    fn pattern(p: &str) -> FileMount {
        FileMount::Pattern(p.to_owned())
    }

    fn placement(source: &str, destination: &str) -> FileMount {
        FileMount::Placement { source: source.to_owned(), destination: destination.to_owned() }
    }

    // The expectations below are what Spin 4.0.2 itself produced for the same
    // tree (checked once with the real binary; the real-Spin lane re-checks it).

    #[test]
    fn a_directory_pattern_is_nested_twice_as_in_spin() {
        let tree = Tree::new();
        assert_eq!(
            tree.copy(&[pattern("d")], &[]).unwrap(),
            ["/d/", "/d/d/", "/d/d/.hidden=H", "/d/d/a.txt=A", "/d/d/c.md=C", "/d/d/sub/", "/d/d/sub/b.txt=B"]
        );
    }

    #[test]
    fn globs_keep_their_app_relative_paths() {
        let tree = Tree::new();
        assert_eq!(tree.copy(&[pattern("d/*.md")], &[]).unwrap(), ["/d/", "/d/c.md=C"]);
        assert_eq!(tree.copy(&[pattern("top.txt")], &[]).unwrap(), ["/top.txt=T"]);
    }

    #[test]
    fn placements_put_a_directory_or_a_file_at_the_destination() {
        let tree = Tree::new();
        assert_eq!(
            tree.copy(&[placement("d/sub", "/placed"), placement("d/a.txt", "/one/a2.txt")], &[]).unwrap(),
            ["/one/", "/one/a2.txt=A", "/placed/", "/placed/b.txt=B"]
        );
    }

    #[test]
    fn exclude_files_match_app_relative_paths_of_every_mount() {
        let tree = Tree::new();
        assert_eq!(
            tree.copy(&[placement("d", "/site")], &["d/sub/*", "**/*.md"]).unwrap(),
            ["/site/", "/site/.hidden=H", "/site/a.txt=A"]
        );
        // An excluded placement still leaves its (empty) directory, as in Spin.
        assert_eq!(tree.copy(&[placement("d/sub", "/placed")], &["d/sub/*"]).unwrap(), ["/placed/"]);
    }

    #[test]
    fn bad_sources_fail_the_load_with_spins_reasons() {
        let tree = Tree::new();
        let err = |files: &[FileMount]| format!("{:#}", tree.copy(files, &[]).unwrap_err());
        assert!(err(&[pattern("missing")]).contains("does not exist and doesn't appear to be a glob pattern"));
        assert!(err(&[placement("missing", "/x")]).contains("does not exist"));
        assert!(err(&[pattern("d/..")]).contains("parent directory"));
        assert!(err(&[pattern(".")]).contains("current directory"));
        assert!(err(&[placement("top.txt", "/")]).contains("is not a valid destination file name"));
        assert!(err(&[pattern("../*.txt")]).contains("outside the application directory"));
    }

    #[test]
    fn direct_mounts_take_directories_only_and_no_excludes() {
        let tree = Tree::new();
        let app = tree.app();
        let direct = Mounting::Direct { run_dir: &app };
        let mounts = component_mounts(direct, &app, "c", &[pattern("d"), placement("d/sub", "/placed")], &[]).unwrap();
        assert_eq!(mounts, vec![(app.join("d"), "d".to_owned()), (app.join("d/sub"), "/placed".to_owned())]);
        assert!(!tree.assets().exists(), "direct mounts copy nothing");
        let err = component_mounts(direct, &app, "c", &[pattern("d/*.md")], &[]).unwrap_err();
        assert!(err.to_string().contains("Only directory mounts are supported with `--direct-mounts`"), "{err}");
        let err = component_mounts(direct, &app, "c", &[pattern("d")], &["x".into()]).unwrap_err();
        assert!(err.to_string().contains("exclude_files"), "{err}");
    }

    #[test]
    fn direct_mounts_resolve_against_the_run_directory_as_spin_4_0_2_does() {
        let tree = Tree::new();
        let elsewhere = tree.0.path().join("elsewhere");
        let mounts = component_mounts(
            Mounting::Direct { run_dir: &elsewhere },
            &tree.app(),
            "c",
            &[placement("d", "/site")],
            &[],
        )
        .unwrap();
        assert_eq!(mounts, vec![(elsewhere.join("d"), "/site".to_owned())]);
    }

    #[test]
    fn copies_are_bytes_not_times() {
        let tree = Tree::new();
        let src = tree.app().join("top.txt");
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::options().write(true).open(&src).unwrap().set_modified(old).unwrap();
        tree.copy(&[pattern("top.txt")], &[]).unwrap();
        let copied = std::fs::metadata(tree.assets().join("c/top.txt")).unwrap();
        assert_ne!(copied.modified().unwrap(), old, "Spin's copy does not keep mtimes");
    }
}
