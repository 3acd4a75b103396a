//! spin.toml (manifest version 2), the subset of it an HTTP application uses.
//!
//! Field names and shapes follow Spin's manifest reference; unknown fields are
//! rejected so a typo fails loudly instead of silently doing nothing.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub spin_manifest_version: u32,
    pub application: Application,
    #[serde(default)]
    pub variables: BTreeMap<String, VariableDecl>,
    #[serde(default)]
    pub trigger: Triggers,
    #[serde(default)]
    pub component: BTreeMap<String, ComponentDecl>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Application {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub authors: Vec<String>,
}

/// `[variables]` entry: exactly one of `default` or `required = true`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableDecl {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub secret: bool,
}

#[derive(Debug, Default, Deserialize)]
pub struct Triggers {
    #[serde(default)]
    pub http: Vec<HttpTrigger>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpTrigger {
    pub route: RouteDecl,
    pub component: String,
    #[serde(default)]
    pub executor: Option<toml::Value>,
}

/// `route = "/path/..."` or `route = { private = true }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RouteDecl {
    Path(String),
    Private { private: bool },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentDecl {
    pub source: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub files: Vec<FileMount>,
    #[serde(default)]
    pub exclude_files: Vec<String>,
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    pub key_value_stores: Vec<String>,
    #[serde(default)]
    pub sqlite_databases: Vec<String>,
    /// Component variable name -> template over application variables.
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    #[serde(default)]
    pub build: Option<toml::Value>,
}

/// `files = ["dir/*"]` or `files = [{ source = "dir", destination = "/x" }]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum FileMount {
    Pattern(String),
    Placement { source: String, destination: String },
}

impl Manifest {
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading manifest {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("parsing manifest {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let manifest: Manifest = toml::from_str(text)?;
        manifest.validate()?;
        Ok(manifest)
    }

    fn validate(&self) -> Result<()> {
        if self.spin_manifest_version != 2 {
            bail!("spin_manifest_version {} is not supported (expected 2)", self.spin_manifest_version);
        }
        for (name, decl) in &self.variables {
            validate_variable_name(name)?;
            match (&decl.default, decl.required) {
                (Some(_), true) => bail!("variable '{name}': `default` and `required` are exclusive"),
                (None, false) => bail!("variable '{name}': needs a `default` or `required = true`"),
                _ => {}
            }
        }
        for trigger in &self.trigger.http {
            if !self.component.contains_key(&trigger.component) {
                bail!(
                    "trigger route {:?} names component '{}', which is not declared",
                    trigger.route,
                    trigger.component
                );
            }
            if let RouteDecl::Private { private: false } = trigger.route {
                bail!(
                    "route must be a path or `{{ private = true }}`: component '{}' has {{ private = false }}",
                    trigger.component
                );
            }
        }
        for (id, component) in &self.component {
            validate_component_id(id)?;
            for name in component.variables.keys() {
                validate_variable_name(name).with_context(|| format!("component '{id}'"))?;
            }
        }
        Ok(())
    }
}

/// Spin: variable names are lower_snake_case, starting with a letter.
pub fn validate_variable_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.ends_with('_')
        && !name.contains("__");
    if !ok {
        bail!("invalid variable name '{name}': use lower_snake_case");
    }
    Ok(())
}

/// Spin: component ids are kebab-case (letters, digits, '-').
pub fn validate_component_id(id: &str) -> Result<()> {
    let ok = id.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        bail!("invalid component id '{id}': use kebab-case");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
spin_manifest_version = 2
[application]
name = "t"
[variables]
a = { default = "x" }
b = { required = true, secret = true }
[[trigger.http]]
route = "/..."
component = "web"
[[trigger.http]]
route = { private = true }
component = "sim"
[component.web]
source = "web.wasm"
files = [{ source = "static", destination = "/site" }, "assets/*"]
allowed_outbound_hosts = ["http://sim.spin.internal"]
[component.web.variables]
greeting = "hello {{ a }}"
[component.sim]
source = "sim.wasm"
"#;

    #[test]
    fn parses_the_subset_we_use() {
        let m = Manifest::parse(MINIMAL).unwrap();
        assert_eq!(m.application.name, "t");
        assert!(m.variables["b"].required && m.variables["b"].secret);
        assert_eq!(m.trigger.http.len(), 2);
        assert!(matches!(m.trigger.http[1].route, RouteDecl::Private { private: true }));
        let web = &m.component["web"];
        assert_eq!(web.variables["greeting"], "hello {{ a }}");
        assert!(
            matches!(&web.files[0], FileMount::Placement { source, destination } if source == "static" && destination == "/site")
        );
        assert!(matches!(&web.files[1], FileMount::Pattern(p) if p == "assets/*"));
    }

    #[test]
    fn rejects_bad_declarations() {
        let both = MINIMAL.replace(r#"a = { default = "x" }"#, r#"a = { default = "x", required = true }"#);
        assert!(Manifest::parse(&both).is_err());
        let neither = MINIMAL.replace(r#"a = { default = "x" }"#, "a = { secret = true }");
        assert!(Manifest::parse(&neither).is_err());
        let bad_name = MINIMAL.replace(r#"a = { default"#, r#"Bad = { default"#);
        assert!(Manifest::parse(&bad_name).is_err());
        let unknown_component = MINIMAL.replace(r#"component = "sim""#, r#"component = "nope""#);
        assert!(Manifest::parse(&unknown_component).is_err());
        let typo = MINIMAL.replace("allowed_outbound_hosts", "allowed_outbound_host");
        assert!(Manifest::parse(&typo).is_err());
        let not_private = MINIMAL.replace("{ private = true }", "{ private = false }");
        assert!(Manifest::parse(&not_private).is_err());
        let v1 = MINIMAL.replace("spin_manifest_version = 2", "spin_manifest_version = 1");
        assert!(Manifest::parse(&v1).is_err());
    }
}
