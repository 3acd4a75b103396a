//! Test helpers that keep a component's error catalog honest: the codes its
//! `error.rs` builds, the codes the OpenAPI document names, and the source
//! files that build an envelope outside the catalog.

use std::collections::BTreeSet;
use std::path::Path;

/// A catalog file's text up to its tests.
pub fn catalog_source(source: &str) -> &str {
    source.find("#[cfg(test)]").map_or(source, |end| &source[..end])
}

/// The `error_code` of every `ApiError::new(status, "code", ...)` in
/// `source`; a code passed in by the caller (not a literal) is not read.
pub fn codes_built_in(source: &str) -> BTreeSet<&str> {
    source
        .match_indices("ApiError::new(")
        .filter_map(|(at, call)| {
            let args = &source[at + call.len()..];
            let code = args[args.find(',')? + 1..].trim_start().strip_prefix('"')?;
            Some(&code[..code.find('"')?])
        })
        .collect()
}

/// Every `error_code` an OpenAPI document names: the enums of the error
/// schemas (inline or on the next line) and single codes.
pub fn documented_codes(yaml: &str) -> BTreeSet<&str> {
    let mut codes = BTreeSet::new();
    for (at, key) in yaml.match_indices("error_code:") {
        let rest = yaml[at + key.len()..].trim_start();
        if let Some(list) = rest.strip_prefix("{ enum: [").or_else(|| rest.strip_prefix("enum: [")) {
            codes.extend(list[..list.find(']').expect("a closed enum")].split(',').map(str::trim));
        } else if rest.starts_with(|c: char| c.is_ascii_lowercase()) {
            codes.extend(rest.split_whitespace().next());
        }
    }
    codes
}

/// The files under `src` (paths relative to it) that build an envelope
/// themselves, except those `exempt` names (the catalog, test files).
pub fn envelopes_built_outside(src: &Path, exempt: impl Fn(&str) -> bool) -> Vec<String> {
    let mut pending = vec![src.to_path_buf()];
    let mut offenders = Vec::new();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).expect("a readable folder").map(|e| e.expect("an entry").path()));
            continue;
        }
        let name = path.strip_prefix(src).expect("below src").to_string_lossy().into_owned();
        if !exempt(&name) && std::fs::read_to_string(&path).expect("a text file").contains("ApiError::new(") {
            offenders.push(name);
        }
    }
    offenders.sort();
    offenders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_from_constructors_and_documents() {
        let source = "fn a() -> ApiError { ApiError::new(400, \"bad\", \"x\") }\nfn b(code: &'static str) -> ApiError { ApiError::new(\n    502,\n    code,\n    \"a message\",\n) }\n#[cfg(test)]\nApiError::new(1, \"test_only\", \"\")";
        assert_eq!(codes_built_in(catalog_source(source)), BTreeSet::from(["bad"]));
        let yaml =
            "error_code: { enum: [a, b] }\n  error_code:\n    enum: [c]\nerror_code: d\nerror_code: { type: string }";
        assert_eq!(documented_codes(yaml), BTreeSet::from(["a", "b", "c", "d"]));
    }
}
