//! The operator-level allowlist of the hosts it sends requests to: control
//! planes (an AgentControlPlane's `url` or `region`) and agent servers (an
//! AgentDeployment's `sourceConfig.customUrl`, and the deployment URL that
//! `spec.verify` calls), and the one host it makes an agent server send to
//! (an AgentCron's `spec.webhook`, where each run's output is posted).
//!
//! Whoever may create an AgentControlPlane or an AgentDeployment picks these
//! URLs; without a list the operator would send requests to any HTTPS host
//! and port the cluster can reach (a server-side request forgery). The
//! platform team sets the list with `agent-operator run --allowed-hosts`
//! (Helm values `allowedHosts` and `extraAllowedHosts`); a URL outside it is
//! reported `Stalled`, reason `HostNotAllowed`, before any request is sent.
//!
//! Entries ([`HostPattern`]):
//! - `host` — that host exactly: a DNS name (case-insensitive, a trailing
//!   dot ignored, internationalized names in their ASCII form) or an IP
//!   address (`127.0.0.1`, `::1` or `[::1]`);
//! - `*.suffix` — any host strictly below `suffix` (`*.langgraph.app`
//!   matches `a.us.langgraph.app`, not `langgraph.app` itself); never an IP;
//! - either, followed by `:port` — only that port (the URL's explicit port,
//!   or 443/80 for `https`/`http` without one); without a port, any port.
//!
//! There is no "allow everything" entry. The default
//! ([`DEFAULT_ALLOWED_HOSTS`]) is the LangSmith Cloud control planes of the
//! two documented regions (docs/control-plane-api.md, "Hosts and headers")
//! and the cloud deployment URLs below `langgraph.app`. Loopback is not in
//! it: a development setup (the emulator, `langgraph dev`) adds `127.0.0.1`.
//!
//! The list is checked on the host of the URL as parsed (the same parser
//! the HTTP client uses), so spellings such as `0x7f.1` or `LOCALHOST.` are
//! compared in their normal form. It does not resolve names: a listed name
//! whose DNS points at an internal address is trusted like its owner.
//!
//! `agentctl` does not apply the list: it runs with the user's own
//! credentials and sends what the user asks.

use std::fmt;
use std::str::FromStr;

use url::{Host, Url};

/// The flag that sets the list, named in every refusal.
pub const FLAG: &str = "--allowed-hosts";

/// The default list: the US and EU LangSmith Cloud control planes and the
/// cloud deployment URLs (`*.langgraph.app`, which covers
/// `*.us.langgraph.app` and `*.eu.langgraph.app`).
pub const DEFAULT_ALLOWED_HOSTS: [&str; 3] = [
    "api.host.langchain.com",
    "eu.api.host.langchain.com",
    "*.langgraph.app",
];

/// One entry of the list (see the module docs for the syntax).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPattern {
    /// What the host must be.
    host: HostMatch,
    /// The only port allowed; `None`: any port.
    port: Option<u16>,
    /// The entry as written, for messages.
    text: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostMatch {
    /// Exactly this host (domains lowercase, without a trailing dot).
    Exact(Host<String>),
    /// A domain strictly below this one (lowercase, no leading or trailing
    /// dot).
    Below(String),
}

/// Splits `entry` into its host and an optional port: `host:port`,
/// `[v6]:port`, `[v6]`, a bare IPv6 address (two or more `:`) or `host`.
fn split_port(entry: &str) -> Result<(&str, Option<u16>), String> {
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{entry:?}: the port {p:?} is not a number from 1 to 65535"))
    };
    if let Some(rest) = entry.strip_prefix('[') {
        let (v6, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{entry:?}: an IPv6 address without its closing ']'"))?;
        return match after {
            "" => Ok((&entry[..v6.len() + 2], None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((&entry[..v6.len() + 2], Some(port(p)?))),
                None => Err(format!("{entry:?}: unexpected text after ']'")),
            },
        };
    }
    match entry.matches(':').count() {
        0 => Ok((entry, None)),
        1 => {
            let (host, p) = entry.split_once(':').unwrap_or((entry, ""));
            Ok((host, Some(port(p)?)))
        }
        // A bare IPv6 address: no port (write `[v6]:port` for one).
        _ => Ok((entry, None)),
    }
}

/// `host` as the URL parser would have it (IDNA, lowercase, IPv4 forms),
/// without a trailing dot; an IPv6 address with or without brackets.
fn parse_host(entry: &str, host: &str) -> Result<Host<String>, String> {
    let bracketed;
    let input = if host.contains(':') && !host.starts_with('[') {
        bracketed = format!("[{host}]");
        bracketed.as_str()
    } else {
        host
    };
    match Host::parse(input).map_err(|e| format!("{entry:?}: not a host name or address: {e}"))? {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_owned();
            if d.is_empty() {
                return Err(format!("{entry:?}: empty host"));
            }
            Ok(Host::Domain(d))
        }
        other => Ok(other),
    }
}

impl FromStr for HostPattern {
    type Err = String;

    /// Parses one entry. Errors: an empty entry, a scheme, path or
    /// credentials, a `*` anywhere but a leading `*.` label, `*.` before an
    /// IP address, a port that is not 1–65535, a host the URL parser
    /// refuses.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        if text.is_empty() {
            return Err("an empty entry".into());
        }
        if text.contains("://")
            || text.contains(['/', '@', '?', '#'])
            || text.contains(char::is_whitespace)
        {
            return Err(format!(
                "{text:?}: an entry is a host, `*.suffix` or either with `:port`, without a scheme, path or credentials"
            ));
        }
        let (host_text, port) = split_port(text)?;
        let host = match host_text.strip_prefix("*.") {
            Some(suffix) => {
                if suffix.contains('*') {
                    return Err(format!("{text:?}: `*` may only be the first label"));
                }
                match parse_host(text, suffix)? {
                    Host::Domain(d) if d.contains('.') => HostMatch::Below(d),
                    Host::Domain(_) => {
                        return Err(format!(
                            "{text:?}: `*.` needs a suffix of at least two labels (e.g. `*.example.com`)"
                        ));
                    }
                    _ => return Err(format!("{text:?}: `*.` cannot precede an IP address")),
                }
            }
            None if host_text.contains('*') => {
                return Err(format!(
                    "{text:?}: `*` may only be the first label (`*.suffix`); there is no entry allowing every host"
                ));
            }
            None => HostMatch::Exact(parse_host(text, host_text)?),
        };
        Ok(Self {
            host,
            port,
            text: text.to_owned(),
        })
    }
}

impl HostPattern {
    /// True when `url`'s host (and port, if the entry names one) matches.
    pub fn matches(&self, url: &Url) -> bool {
        let Some(host) = url.host() else {
            return false;
        };
        if let Some(p) = self.port
            && url.port_or_known_default() != Some(p)
        {
            return false;
        }
        match (&self.host, host) {
            (HostMatch::Exact(Host::Domain(want)), Host::Domain(d)) => {
                d.trim_end_matches('.').eq_ignore_ascii_case(want)
            }
            (HostMatch::Exact(Host::Ipv4(want)), Host::Ipv4(ip)) => *want == ip,
            (HostMatch::Exact(Host::Ipv6(want)), Host::Ipv6(ip)) => *want == ip,
            (HostMatch::Below(suffix), Host::Domain(d)) => {
                let d = d.trim_end_matches('.').as_bytes();
                let s = suffix.as_bytes();
                d.len() > s.len() + 1
                    && d[d.len() - s.len()..].eq_ignore_ascii_case(s)
                    && d[d.len() - s.len() - 1] == b'.'
            }
            _ => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The hosts the operator may send requests to (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostAllowlist {
    entries: Vec<HostPattern>,
}

impl Default for HostAllowlist {
    /// [`DEFAULT_ALLOWED_HOSTS`].
    fn default() -> Self {
        Self::parse(DEFAULT_ALLOWED_HOSTS).unwrap_or(Self {
            entries: Vec::new(),
        })
    }
}

impl fmt::Display for HostAllowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let texts: Vec<&str> = self.entries.iter().map(|e| e.text.as_str()).collect();
        f.write_str(&texts.join(","))
    }
}

/// Why a URL may not be called: the message names the field, the host and
/// the flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostNotAllowed(pub String);

impl fmt::Display for HostNotAllowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl HostAllowlist {
    /// The list of `entries` (each one entry; no comma splitting here).
    ///
    /// Errors: the first entry that does not parse, with why. An empty list
    /// is accepted (nothing is allowed).
    pub fn parse<I, S>(entries: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let entries = entries
            .into_iter()
            .map(|e| e.as_ref().parse::<HostPattern>())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { entries })
    }

    /// The entries, as written.
    pub fn entries(&self) -> impl Iterator<Item = &HostPattern> {
        self.entries.iter()
    }

    /// True when an entry matches `url`'s host (and port).
    pub fn allows(&self, url: &Url) -> bool {
        self.entries.iter().any(|e| e.matches(url))
    }

    /// Checks `url`, the value of `field` (e.g. `spec.url`): `Ok` when
    /// allowed; otherwise a message naming the field, the host and port, the
    /// list and the flag. A URL that does not parse, or has no host, is not
    /// allowed. The URL itself is not repeated (it may carry credentials).
    pub fn check(&self, url: &str, field: &str) -> Result<(), HostNotAllowed> {
        let parsed = match Url::parse(url.trim()) {
            Ok(u) if u.host().is_some() => u,
            _ => {
                return Err(HostNotAllowed(format!(
                    "{field} is not a URL with a host, so it cannot be checked against the operator's {FLAG}; nothing was sent"
                )));
            }
        };
        if self.allows(&parsed) {
            return Ok(());
        }
        let host = parsed.host_str().unwrap_or_default();
        let port = parsed
            .port_or_known_default()
            .map(|p| format!(":{p}"))
            .unwrap_or_default();
        let list = if self.entries.is_empty() {
            "empty".to_owned()
        } else {
            self.to_string()
        };
        Err(HostNotAllowed(format!(
            "{field}: host {host}{port} is not allowed by the operator's {FLAG} ({list}); nothing was sent. A platform admin can add it to {FLAG} (Helm value extraAllowedHosts)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> HostAllowlist {
        HostAllowlist::parse(entries).unwrap()
    }

    fn allows(l: &HostAllowlist, url: &str) -> bool {
        l.allows(&Url::parse(url).unwrap())
    }

    #[test]
    fn the_default_allows_the_cloud_and_nothing_else() {
        let l = HostAllowlist::default();
        for ok in [
            "https://api.host.langchain.com",
            "https://eu.api.host.langchain.com/v2/deployments",
            "https://API.HOST.LANGCHAIN.COM./",
            "https://my-agent-1a2b3c.us.langgraph.app",
            "https://my-agent-1a2b3c.eu.langgraph.app",
            "https://x.langgraph.app:8443",
        ] {
            assert!(allows(&l, ok), "{ok}");
        }
        for refused in [
            "https://langgraph.app",
            "https://evil-langgraph.app",
            "https://langgraph.app.evil.example",
            "https://ap.api.host.langchain.com",
            "https://api.host.langchain.com.evil.example",
            "http://127.0.0.1:8585",
            "http://localhost:2024",
            "http://[::1]:2024",
            "https://169.254.169.254/latest/meta-data",
            "https://kubernetes.default.svc",
            "https://10.0.0.1",
        ] {
            assert!(!allows(&l, refused), "{refused}");
        }
    }

    #[test]
    fn exact_hosts_addresses_and_ports() {
        let l = list(&["127.0.0.1", "cp.example.com:8443", "[::1]:2024", "::2"]);
        assert!(allows(&l, "http://127.0.0.1:8585"));
        assert!(allows(&l, "http://127.0.0.1"));
        // Other spellings of the same address are the same address.
        assert!(allows(&l, "http://2130706433:1"));
        assert!(allows(&l, "http://0x7f.0.0.1:1"));
        assert!(!allows(&l, "http://127.0.0.2"));
        assert!(!allows(&l, "http://localhost:8585"));
        assert!(allows(&l, "https://cp.example.com:8443/api-host"));
        assert!(allows(&l, "https://CP.Example.COM.:8443"));
        assert!(!allows(&l, "https://cp.example.com"));
        assert!(!allows(&l, "https://cp.example.com:8444"));
        assert!(!allows(&l, "https://a.cp.example.com:8443"));
        assert!(allows(&l, "http://[::1]:2024"));
        assert!(!allows(&l, "http://[::1]:2025"));
        assert!(allows(&l, "http://[0:0:0:0:0:0:0:2]:9"));
        // A default port counts as that port.
        let l = list(&["h.example:443"]);
        assert!(allows(&l, "https://h.example"));
        assert!(!allows(&l, "http://h.example"));
    }

    #[test]
    fn suffixes_match_strictly_below() {
        let l = list(&["*.corp.example", "*.Münich.example:8443"]);
        assert!(allows(&l, "https://a.corp.example"));
        assert!(allows(&l, "https://a.b.corp.example:9000"));
        assert!(!allows(&l, "https://corp.example"));
        assert!(!allows(&l, "https://acorp.example"));
        assert!(!allows(&l, "https://a.corp.example.evil"));
        assert!(!allows(&l, "https://10.0.0.1"));
        assert!(allows(&l, "https://x.xn--mnich-kva.example:8443"));
        assert!(allows(&l, "https://x.münich.example:8443"));
        assert!(!allows(&l, "https://x.münich.example"));
    }

    #[test]
    fn bad_entries_are_refused_with_a_reason() {
        for bad in [
            "",
            "  ",
            "*",
            "*.",
            "*.com",
            "a.*.example",
            "*.*.example",
            "*.10.0.0.1",
            "https://h.example",
            "h.example/path",
            "user@h.example",
            "h.example:0",
            "h.example:99999",
            "h.example:http",
            "[::1",
            "[::1]x",
            "h ex.example",
        ] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad:?} was accepted");
        }
        assert!(HostAllowlist::parse(["ok.example", "*"]).is_err());
    }

    #[test]
    fn refusals_name_the_field_the_host_and_the_flag() {
        let l = list(&["127.0.0.1"]);
        assert!(l.check("http://127.0.0.1:1/x", "spec.url").is_ok());
        let e = l
            .check("https://user:hunter2@internal.example:8443/x", "spec.url")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("spec.url: host internal.example:8443 "),
            "{e}"
        );
        assert!(e.contains("--allowed-hosts (127.0.0.1)"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        let e = l
            .check("not a url", "spec.sourceConfig.customUrl")
            .unwrap_err();
        assert!(e.0.contains("spec.sourceConfig.customUrl"), "{e}");
        let e = HostAllowlist::parse::<[&str; 0], &str>([])
            .unwrap()
            .check("https://a.example", "spec.url")
            .unwrap_err();
        assert!(e.0.contains("(empty)"), "{e}");
    }
}
