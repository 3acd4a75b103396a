//! Every relative link in every Markdown file of the repository resolves: the
//! file or directory it names exists, and a `#fragment` names a heading of the
//! Markdown file it points to (GitHub's anchors: the heading's text lowercased,
//! spaces to `-`, punctuation dropped, `-1`, `-2`… for repeats) or an explicit
//! `id` / `name` anchor. Links in fenced code blocks and code spans are not
//! links. And docs/variables.md has a row for every variable of spin.toml.
//! Reading files only, so the lanes that rerun it stay cheap.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// Directories never walked: build output, installed packages, git's own.
const SKIPPED_DIRS: [&str; 3] = ["target", "node_modules", ".git"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the repository").to_path_buf()
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("readable directory").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name) {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The file's text outside fenced code blocks, with code spans blanked
/// (newlines kept, so offsets still give line numbers).
fn prose(text: &str) -> String {
    blank_code_spans(&outside_fences(text))
}

/// The file's text with each line of a fenced code block left empty.
fn outside_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<(char, usize)> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (fence, marker) {
            (None, Some(m)) if run >= 3 => fence = Some((m, run)),
            (Some((m, n)), Some(c)) if c == m && run >= n && trimmed[run..].trim().is_empty() => fence = None,
            _ if fence.is_none() => {
                out.push_str(line);
                continue;
            }
            _ => {}
        }
        out.push('\n');
    }
    out
}

fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let run_at = |i: usize| chars[i..].iter().take_while(|c| **c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        // The closing run has exactly the opening's length.
        let mut j = i + n;
        let close = loop {
            if j >= chars.len() {
                break None;
            }
            if chars[j] == '`' {
                let m = run_at(j);
                if m == n {
                    break Some(j);
                }
                j += m;
            } else {
                j += 1;
            }
        };
        match close {
            Some(j) => {
                for c in &mut out[i..j + n] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = j + n;
            }
            None => i += n,
        }
    }
    out.into_iter().collect()
}

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    let text = strip_inline_markup(heading);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// A heading's text as rendered: link targets, HTML tags, code and emphasis
/// markers removed.
fn strip_inline_markup(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("](") {
            // `[text](target)`: the text stays, the target goes.
            let end = rest.find(')').map_or(rest.len(), |e| e + 1);
            rest = &rest[end..];
            continue;
        }
        if c == '<' {
            if let Some(end) = rest.find('>') {
                rest = &rest[end + 1..];
                continue;
            }
        }
        if !matches!(c, '`' | '*' | '[' | ']') {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The anchors a Markdown file defines: its headings' slugs (repeats numbered
/// as GitHub numbers them) and any HTML `id` or `name` attribute.
fn anchors(text: &str) -> BTreeSet<String> {
    let headings = outside_fences(text);
    let lines: Vec<&str> = headings.lines().collect();
    let prose = prose(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let atx = (line.len() - trimmed.len() <= 3)
            .then(|| {
                let hashes = trimmed.chars().take_while(|c| *c == '#').count();
                let after = &trimmed[hashes..];
                ((1..=6).contains(&hashes) && (after.is_empty() || after.starts_with([' ', '\t'])))
                    .then(|| after.trim().trim_end_matches('#').trim_end().to_string())
            })
            .flatten();
        let setext = (i > 0
            && !line.trim().is_empty()
            && (line.trim().chars().all(|c| c == '=') || line.trim().chars().all(|c| c == '-')))
        .then(|| lines[i - 1].trim())
        .filter(|prev| {
            !prev.is_empty() && !prev.starts_with(['|', '-', '*', '#', '>']) && !lines[i - 1].starts_with("    ")
        })
        .map(str::to_string);
        if let Some(heading) = atx.or(setext) {
            let base = slug(&heading);
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
            *n += 1;
        }
    }
    for line in prose.lines() {
        for attr in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attr) {
                rest = &rest[at + attr.len()..];
                if let Some(end) = rest.find('"') {
                    out.insert(rest[..end].to_string());
                }
            }
        }
    }
    out
}

/// Every link destination in the file's prose, with its line number: inline
/// links and images `[..](dest)`, reference definitions `[..]: dest`, and HTML
/// `href` / `src` attributes.
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = prose(text);
    let mut out = Vec::new();
    let line_of = |at: usize| prose[..at].matches('\n').count() + 1;
    let mut from = 0;
    while let Some(at) = prose[from..].find("](") {
        let start = from + at + 2;
        // The destination ends at the `)` that balances, or at a space before a title.
        let mut depth = 0usize;
        let mut end = start;
        for (k, c) in prose[start..].char_indices() {
            end = start + k;
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => break,
                ')' => depth -= 1,
                '\n' => break,
                _ => {}
            }
        }
        let inner = prose[start..end].trim();
        let dest = match inner.strip_prefix('<') {
            Some(angled) => angled.split('>').next().unwrap_or_default(),
            None => inner.split_whitespace().next().unwrap_or_default(),
        };
        out.push((line_of(start), dest.to_string()));
        from = end.max(start);
    }
    for (n, line) in prose.lines().enumerate() {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3 && trimmed.starts_with('[') {
            if let Some(close) = trimmed.find("]:") {
                if let Some(dest) = trimmed[close + 2..].split_whitespace().next() {
                    out.push((n + 1, dest.trim_start_matches('<').trim_end_matches('>').to_string()));
                }
            }
        }
        for attr in ["href=\"", "src=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attr) {
                rest = &rest[at + attr.len()..];
                if let Some(end) = rest.find('"') {
                    out.push((n + 1, rest[..end].to_string()));
                }
            }
        }
    }
    out
}

fn is_external(dest: &str) -> bool {
    let scheme = dest.split_once(':').map(|(s, _)| s);
    dest.starts_with("//")
        || scheme.is_some_and(|s| {
            !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) && !s.contains('/')
        })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The broken links of the Markdown files under `root`, one line each.
fn broken_links(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    let mut anchor_cache: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("Markdown is UTF-8");
        let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
        for (line, dest) in links(&text) {
            if dest.is_empty() || is_external(&dest) {
                continue;
            }
            let (path, fragment) = match dest.split_once('#') {
                Some((p, f)) => (p, Some(percent_decode(f))),
                None => (dest.as_str(), None),
            };
            let path = percent_decode(path.split('?').next().unwrap_or_default());
            let target = if path.is_empty() {
                file.clone()
            } else if let Some(from_root) = path.strip_prefix('/') {
                normalize(&root.join(from_root))
            } else {
                normalize(&file.parent().unwrap().join(&path))
            };
            if !target.starts_with(root) || !target.exists() {
                broken.push(format!("{shown}:{line}: ({dest}): no such file {}", target.display()));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if target.extension().is_some_and(|e| e == "md") {
                let known = anchor_cache
                    .entry(target.clone())
                    .or_insert_with(|| anchors(&std::fs::read_to_string(&target).expect("Markdown is UTF-8")));
                if !known.contains(&fragment) {
                    broken.push(format!("{shown}:{line}: ({dest}): no heading or anchor '{fragment}' there"));
                }
            } else if !is_line_anchor(&fragment) {
                broken.push(format!("{shown}:{line}: ({dest}): '#{fragment}' on a file that is not Markdown"));
            }
        }
    }
    broken
}

/// GitHub's line anchors on a source file: `L12` or `L12-L20`.
fn is_line_anchor(fragment: &str) -> bool {
    let line = |s: &str| s.strip_prefix('L').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    match fragment.split_once('-') {
        Some((a, b)) => line(a) && line(b),
        None => line(fragment),
    }
}

#[test]
fn every_relative_link_in_every_markdown_file_resolves() {
    let root = repo_root();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    assert!(files.iter().any(|f| f.ends_with("README.md")), "the walk found no README.md under {}", root.display());
    let checked: usize = files
        .iter()
        .map(|f| links(&std::fs::read_to_string(f).unwrap()).iter().filter(|(_, d)| !is_external(d)).count())
        .sum();
    assert!(checked > 50, "only {checked} relative links found: the parser is missing them");
    let broken = broken_links(&root);
    assert!(broken.is_empty(), "{} broken link(s):\n{}", broken.len(), broken.join("\n"));
}

#[test]
fn heading_anchors_follow_githubs_rules() {
    // Anchors as github.com renders them for these headings.
    let cases = [
        ("## Quick start", "quick-start"),
        (
            "### The console's API (`crates/console-api`, served by `components/debug-api`)",
            "the-consoles-api-cratesconsole-api-served-by-componentsdebug-api",
        ),
        (
            "#### Issue 14 §1–§2: profiled, then 2.8× through one stream, 2026-12-03",
            "issue-14-12-profiled-then-28-through-one-stream-2026-12-03",
        ),
        (
            "### Upstream connections kept alive (issue 24 §6, 2026-12-05)",
            "upstream-connections-kept-alive-issue-24-6-2026-12-05",
        ),
        ("## Demo world (`seed_demo_data=true`)", "demo-world-seed_demo_datatrue"),
        ("## A [linked](x.md) **bold** word", "a-linked-bold-word"),
        ("## Größe und Ärger", "größe-und-ärger"),
    ];
    for (heading, want) in cases {
        let got = anchors(heading);
        assert_eq!(got.into_iter().collect::<Vec<_>>(), [want], "{heading}");
    }
    let repeats = anchors("# Runs\n\n## Runs\n\n### Runs\n");
    assert_eq!(repeats.into_iter().collect::<Vec<_>>(), ["runs", "runs-1", "runs-2"]);
    let setext = anchors("Title here\n==========\n\nSub part\n--------\n");
    assert_eq!(setext.into_iter().collect::<Vec<_>>(), ["sub-part", "title-here"]);
    // A `#` line inside a fence is code, not a heading.
    assert!(anchors("```sh\n# not a heading\n```\n").is_empty());
}

#[test]
fn a_missing_file_an_unknown_fragment_and_a_fragment_on_code_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join("target")).unwrap();
    std::fs::write(root.join("code.rs"), "fn main() {}\n").unwrap();
    std::fs::write(root.join("docs/page.md"), "# Page\n\n## The part\n\nBack to [the start](../README.md#start).\n")
        .unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Start\n\n\
         Fine: [page](docs/page.md), [part](docs/page.md#the-part), [here](#start), [root](/code.rs#L1),\n\
         [web](https://example.com/missing.md), ![img](docs/), `[code](missing.md)`.\n\n\
         ```md\n[fenced](missing.md)\n```\n\n\
         Broken: [gone](docs/gone.md), [frag](docs/page.md#no-such-part), [self](#nowhere),\n\
         [code frag](code.rs#main), [out](../outside.md).\n\n\
         [ref]: docs/also-gone.md\n",
    )
    .unwrap();
    // Build output is skipped, broken or not.
    std::fs::write(root.join("target/x.md"), "[broken](nowhere.md)\n").unwrap();
    let broken = broken_links(&root);
    let dests: Vec<&str> = broken.iter().map(|b| b.split_once(": (").unwrap().1.split_once("):").unwrap().0).collect();
    assert_eq!(
        dests,
        ["docs/gone.md", "docs/page.md#no-such-part", "#nowhere", "code.rs#main", "../outside.md", "docs/also-gone.md"],
        "{broken:#?}"
    );
    assert!(broken[0].starts_with("README.md:10:"), "{}", broken[0]);
}

/// The names of spin.toml's `[variables]` table (its `name = …` lines).
fn manifest_variables(manifest: &str) -> BTreeSet<String> {
    let mut inside = false;
    let mut out = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[variables]";
        } else if inside && !line.starts_with('#') {
            if let Some((name, _)) = line.split_once('=') {
                out.insert(name.trim().to_string());
            }
        }
    }
    out
}

#[test]
fn docs_variables_lists_every_variable_of_spin_toml() {
    let root = repo_root();
    let declared = manifest_variables(&std::fs::read_to_string(root.join("spin.toml")).unwrap());
    assert!(declared.len() > 20 && declared.contains("admin_key"), "{declared:?}");
    // Each row's first cell names one variable or several (`a` / `b`).
    let doc = std::fs::read_to_string(root.join("docs/variables.md")).unwrap();
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix('|')?.split('|').next())
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>())
        .collect();
    let missing: Vec<_> = declared.difference(&documented).collect();
    assert!(missing.is_empty(), "spin.toml variables without a row in docs/variables.md: {missing:?}");
    let unknown: Vec<_> = documented.difference(&declared).collect();
    assert!(unknown.is_empty(), "docs/variables.md rows for no variable of spin.toml: {unknown:?}");
}
