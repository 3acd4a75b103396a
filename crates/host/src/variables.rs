//! Application and component variables, resolved like Spin's default provider.
//!
//! Precedence for an application variable: an explicit `--variable name=value`
//! (or a test override), then `SPIN_VARIABLE_<NAME>` from the environment (the
//! process environment first, then the app directory's `.env` file), then the
//! manifest default. A required variable with no value is a start-up error that
//! names it. Component variables are templates over application variables and a
//! component can read only the names it declares.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::manifest::{validate_variable_name, VariableDecl};

/// Where `SPIN_VARIABLE_*` values come from.
#[derive(Debug, Clone, Default)]
pub struct VariableSources {
    /// Highest precedence: `--variable` flags, or test overrides.
    pub explicit: HashMap<String, String>,
    /// `SPIN_VARIABLE_*` entries (process environment merged over `.env`).
    pub environment: HashMap<String, String>,
}

impl VariableSources {
    /// The sources `spin up` uses: the process environment and `<app_dir>/.env`.
    pub fn from_process(app_dir: &Path) -> Result<Self> {
        let mut environment = read_dotenv(&app_dir.join(".env"))?;
        environment.extend(std::env::vars().filter(|(k, _)| k.starts_with(ENV_PREFIX)));
        Ok(Self { explicit: HashMap::new(), environment })
    }
}

const ENV_PREFIX: &str = "SPIN_VARIABLE_";

fn env_key(name: &str) -> String {
    format!("{ENV_PREFIX}{}", name.to_ascii_uppercase())
}

fn read_dotenv(path: &Path) -> Result<HashMap<String, String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect())
}

/// Resolved application variables. `Debug` never prints values.
pub struct ResolvedVariables {
    values: HashMap<String, String>,
}

impl std::fmt::Debug for ResolvedVariables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

impl ResolvedVariables {
    pub fn resolve(decls: &BTreeMap<String, VariableDecl>, sources: &VariableSources) -> Result<Self> {
        for name in sources.explicit.keys() {
            if !decls.contains_key(name) {
                bail!("variable '{name}' is set but not declared in [variables]");
            }
        }
        let mut values = HashMap::new();
        for (name, decl) in decls {
            let value = sources
                .explicit
                .get(name)
                .or_else(|| sources.environment.get(&env_key(name)))
                .or(decl.default.as_ref());
            match value {
                Some(v) => {
                    values.insert(name.clone(), v.clone());
                }
                None => bail!(
                    "required variable '{name}' has no value: set {} or pass --variable {name}=...",
                    env_key(name)
                ),
            }
        }
        Ok(Self { values })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Expands every `{{ name }}` in `template`; unknown names are errors.
    pub fn expand(&self, template: &str) -> Result<String> {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find("}}").with_context(|| format!("unterminated '{{{{' in template '{template}'"))?;
            let name = after[..end].trim();
            validate_variable_name(name)?;
            let value =
                self.get(name).with_context(|| format!("template '{template}' uses undeclared variable '{name}'"))?;
            out.push_str(value);
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// The variables one component may read: its declared names, expanded.
#[derive(Clone, Default)]
pub struct ComponentVariables {
    values: HashMap<String, String>,
}

impl std::fmt::Debug for ComponentVariables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

/// Why `fermyon:spin/variables.get` failed, mapped onto the WIT error variant.
#[derive(Debug, PartialEq, Eq)]
pub enum VariableError {
    InvalidName(String),
    Undefined(String),
}

impl ComponentVariables {
    pub fn new(templates: &BTreeMap<String, String>, app: &ResolvedVariables) -> Result<Self> {
        let values = templates
            .iter()
            .map(|(name, template)| Ok((name.clone(), app.expand(template)?)))
            .collect::<Result<_>>()?;
        Ok(Self { values })
    }

    pub fn get(&self, name: &str) -> Result<String, VariableError> {
        if validate_variable_name(name).is_err() {
            return Err(VariableError::InvalidName(format!("invalid variable name '{name}'")));
        }
        self.values.get(name).cloned().ok_or_else(|| VariableError::Undefined(format!("no variable for '{name}'")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decls() -> BTreeMap<String, VariableDecl> {
        let d = |default: Option<&str>, required| VariableDecl {
            default: default.map(str::to_string),
            required,
            secret: false,
        };
        BTreeMap::from([("plain".to_string(), d(Some("from-default"), false)), ("needed".to_string(), d(None, true))])
    }

    fn sources(explicit: &[(&str, &str)], env: &[(&str, &str)]) -> VariableSources {
        let map = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        VariableSources { explicit: map(explicit), environment: map(env) }
    }

    #[test]
    fn precedence_is_explicit_then_env_then_default() {
        let d = decls();
        let only_required = sources(&[("needed", "n")], &[]);
        assert_eq!(ResolvedVariables::resolve(&d, &only_required).unwrap().get("plain"), Some("from-default"));
        let env = sources(&[("needed", "n")], &[("SPIN_VARIABLE_PLAIN", "from-env")]);
        assert_eq!(ResolvedVariables::resolve(&d, &env).unwrap().get("plain"), Some("from-env"));
        let both = sources(&[("needed", "n"), ("plain", "explicit")], &[("SPIN_VARIABLE_PLAIN", "from-env")]);
        assert_eq!(ResolvedVariables::resolve(&d, &both).unwrap().get("plain"), Some("explicit"));
        let needed_from_env = sources(&[], &[("SPIN_VARIABLE_NEEDED", "e")]);
        assert_eq!(ResolvedVariables::resolve(&d, &needed_from_env).unwrap().get("needed"), Some("e"));
    }

    #[test]
    fn missing_required_variable_is_an_error_naming_it() {
        let err = ResolvedVariables::resolve(&decls(), &sources(&[], &[])).unwrap_err().to_string();
        assert!(err.contains("'needed'"), "{err}");
        assert!(err.contains("SPIN_VARIABLE_NEEDED"), "{err}");
    }

    #[test]
    fn explicit_undeclared_variable_is_refused() {
        let err = ResolvedVariables::resolve(&decls(), &sources(&[("needed", "n"), ("nope", "x")], &[]));
        assert!(err.is_err());
    }

    #[test]
    fn templates_expand_and_components_see_only_declared_names() {
        let app = ResolvedVariables::resolve(&decls(), &sources(&[("needed", "N")], &[])).unwrap();
        let templates = BTreeMap::from([
            ("url".to_string(), "http://{{plain}}/x?k={{ needed }}".to_string()),
            ("literal".to_string(), "no templates".to_string()),
        ]);
        let vars = ComponentVariables::new(&templates, &app).unwrap();
        assert_eq!(vars.get("url").unwrap(), "http://from-default/x?k=N");
        assert_eq!(vars.get("literal").unwrap(), "no templates");
        assert!(matches!(vars.get("plain"), Err(VariableError::Undefined(_))));
        assert!(matches!(vars.get("Bad-Name"), Err(VariableError::InvalidName(_))));
        let bad = BTreeMap::from([("x".to_string(), "{{ missing }}".to_string())]);
        assert!(ComponentVariables::new(&bad, &app).is_err());
        let open = BTreeMap::from([("x".to_string(), "{{ plain".to_string())]);
        assert!(ComponentVariables::new(&open, &app).is_err());
    }

    #[test]
    fn debug_output_never_shows_values() {
        let app = ResolvedVariables::resolve(&decls(), &sources(&[("needed", "s3cr3t")], &[])).unwrap();
        assert!(!format!("{app:?}").contains("s3cr3t"));
    }
}
