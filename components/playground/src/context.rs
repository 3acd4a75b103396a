//! What every route works with besides the request ([`crate::http`]): the
//! configuration and the injected storage, clock, randomness and egress
//! ([`Ctx`]).

use crate::db::Db;
use crate::egress::Egress;
use crate::error::{self, ApiError};
use crate::net::{self, Cidr};
use crate::util::{hex, BaseUrl};

/// Configuration, from the component's Spin variables.
#[derive(Clone)]
pub struct Config {
    pub bootstrap_admin_email: String,
    pub bootstrap_admin_password: String,
    pub seed_demo_data: bool,
    pub demo_password: String,
    pub brave_base_url: BaseUrl,
    pub linkup_base_url: BaseUrl,
    pub provider_timeout_ms: u64,
    /// Peers whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed.
    pub trusted_proxies: Vec<Cidr>,
}

impl Config {
    pub const DEFAULT_PROVIDER_TIMEOUT_MS: u64 = 8_000;

    /// Builds the configuration from a variable lookup (`None` = unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Config, ApiError> {
        let text = |name: &str| var(name).unwrap_or_default();
        let base = |name: &str, default: &str| {
            let raw = var(name).filter(|v| !v.trim().is_empty()).unwrap_or_else(|| default.to_string());
            BaseUrl::parse(&raw)
                .filter(|b| !b.has_query())
                .ok_or_else(|| error::misconfigured("a provider base URL is not an http(s) URL"))
        };
        Ok(Config {
            bootstrap_admin_email: text("bootstrap_admin_email").trim().to_ascii_lowercase(),
            bootstrap_admin_password: text("bootstrap_admin_password"),
            seed_demo_data: matches!(
                text("seed_demo_data").trim().to_ascii_lowercase().as_str(),
                "true" | "1" | "yes" | "on"
            ),
            demo_password: text("demo_password"),
            brave_base_url: base("brave_base_url", "http://simulator.spin.internal/brave")?,
            linkup_base_url: base("linkup_base_url", "http://simulator.spin.internal/linkup")?,
            provider_timeout_ms: text("provider_timeout_ms")
                .trim()
                .parse()
                .ok()
                .filter(|ms| *ms > 0)
                .unwrap_or(Self::DEFAULT_PROVIDER_TIMEOUT_MS),
            trusted_proxies: net::parse_trusted(&text("trusted_proxies")).map_err(|_| {
                error::misconfigured("trusted_proxies must be a comma-separated list of IP addresses or CIDRs")
            })?,
        })
    }
}

/// A CSPRNG (wasi:random in the component).
pub trait Random {
    fn fill(&self, buf: &mut [u8]);
}

/// Everything a request may use.
pub struct Ctx<'a> {
    pub db: &'a dyn Db,
    pub config: &'a Config,
    /// The wall clock when the request arrived, unix milliseconds.
    pub now_ms: i64,
    pub random: &'a dyn Random,
    pub egress: &'a dyn Egress,
}

impl Ctx<'_> {
    pub fn now_s(&self) -> i64 {
        self.now_ms.div_euclid(1000)
    }

    pub fn random_bytes<const N: usize>(&self) -> [u8; N] {
        let mut buf = [0u8; N];
        self.random.fill(&mut buf);
        buf
    }

    /// `2 * N` lowercase hex characters from the CSPRNG.
    pub fn random_hex<const N: usize>(&self) -> String {
        hex(self.random_bytes::<N>().as_slice())
    }
}
