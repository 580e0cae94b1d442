//! Which `Host` an HTTP listener answers: its own address, and names the operator configured.
//!
//! DNS rebinding: a page on another site makes its own name resolve to the listener's address
//! (127.0.0.1, or a private IP the victim's browser can reach), so the browser treats the
//! listener as that site and lets the page read the answers. The browser still sends the
//! page's name in `Host`; a listener that answers only its own address and configured names
//! gives such a page nothing.
//!
//! The same rule checks the `Origin` (or `Referer`) of state-changing requests in the console:
//! a form posted from another site names that site there.

use std::net::{IpAddr, SocketAddr};

/// The names (besides its own address) a listener answers for.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    /// Configured names, lower case, with the port they must name (`None`: any port).
    names: Vec<(String, Option<u16>)>,
    /// Every `Host` is answered (a listener with no setting for names yet).
    any: bool,
}

impl AllowedHosts {
    /// Own address plus `names`, each `name` (any port) or `name:port`; `Err` names the first
    /// entry that is not a host name or address.
    pub fn new(names: &[String]) -> Result<AllowedHosts, String> {
        let names = names
            .iter()
            .map(|entry| {
                split_authority(entry.trim())
                    .ok_or_else(|| format!("'{entry}' is not a host name, host:port or address"))
            })
            .collect::<Result<_, _>>()?;
        Ok(AllowedHosts { names, any: false })
    }

    /// Answers every `Host` (for listeners without a setting for names).
    pub fn any() -> AllowedHosts {
        AllowedHosts {
            names: Vec::new(),
            any: true,
        }
    }

    /// Whether `authority` (a `Host` value, or the `host[:port]` of an `Origin`) names this
    /// listener: the address the connection arrived on (`local`), `localhost` when that is a
    /// loopback address, or a configured name. A missing port stands for `default_port` (the
    /// scheme's: 80, or 443 under TLS).
    pub fn allows(&self, authority: &str, local: SocketAddr, default_port: u16) -> bool {
        if self.any {
            return true;
        }
        let Some((host, port)) = split_authority(authority) else {
            return false;
        };
        let port_or_default = port.unwrap_or(default_port);
        let own_ip = local.ip().to_canonical();
        let own_port = port_or_default == local.port();
        if own_port && host.parse::<IpAddr>().ok().map(|ip| ip.to_canonical()) == Some(own_ip) {
            return true;
        }
        if own_port && own_ip.is_loopback() && host == "localhost" {
            return true;
        }
        self.names.iter().any(|(name, allowed_port)| {
            *name == host && allowed_port.is_none_or(|allowed| allowed == port_or_default)
        })
    }
}

/// The `host[:port]` of an absolute URL (`Origin`, `Referer`) and its scheme's default port;
/// `None` for anything else (`null`, a relative reference, an unknown scheme).
pub fn url_authority(url: &str) -> Option<(&str, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    // Credentials in a URL (`user@host`) are never sent by browsers in these headers.
    if authority.contains('@') || authority.is_empty() {
        return None;
    }
    Some((authority, default_port))
}

/// Splits `host[:port]` (IPv6 in brackets) into the lower-case host, without a trailing dot,
/// and the port; `None` when it is not that shape.
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        inside.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        (inside, port)
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(text) => Some(text.parse::<u16>().ok()?),
        None => None,
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let well_formed = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
    well_formed.then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(text: &str) -> SocketAddr {
        text.parse().expect("socket address")
    }

    #[test]
    fn own_address_and_localhost_on_loopback_are_answered() {
        let hosts = AllowedHosts::new(&[]).expect("no names");
        let loopback = local("127.0.0.1:8081");
        assert!(hosts.allows("127.0.0.1:8081", loopback, 80));
        assert!(hosts.allows("localhost:8081", loopback, 80));
        assert!(hosts.allows("LOCALHOST.:8081", loopback, 80));
        assert!(
            !hosts.allows("localhost:8082", loopback, 80),
            "another port"
        );
        assert!(!hosts.allows("rebind.attacker.example:8081", loopback, 80));
        assert!(
            !hosts.allows("127.0.0.1", loopback, 80),
            "port 80 is not ours"
        );
        assert!(!hosts.allows("", loopback, 80));
        let network = local("10.0.0.5:80");
        assert!(hosts.allows("10.0.0.5", network, 80));
        assert!(
            !hosts.allows("localhost:80", network, 80),
            "not on loopback"
        );
        let v6 = local("[::1]:8081");
        assert!(hosts.allows("[::1]:8081", v6, 80));
        assert!(!hosts.allows("[::2]:8081", v6, 80));
        let mapped = local("[::ffff:10.0.0.5]:8081");
        assert!(hosts.allows("10.0.0.5:8081", mapped, 80));
    }

    #[test]
    fn configured_names_match_any_port_or_theirs() {
        let hosts = AllowedHosts::new(&["Xjob.Example".into(), "proxy.example:8443".into()])
            .expect("valid names");
        let loopback = local("127.0.0.1:8081");
        assert!(hosts.allows("xjob.example", loopback, 443));
        assert!(hosts.allows("xjob.example:9000", loopback, 80));
        assert!(hosts.allows("proxy.example:8443", loopback, 80));
        assert!(!hosts.allows("proxy.example", loopback, 443));
        assert!(!hosts.allows("evil.xjob.example", loopback, 80));
        assert!(AllowedHosts::new(&["bad host".into()]).is_err());
        assert!(AllowedHosts::new(&["host:99999".into()]).is_err());
        assert!(AllowedHosts::any().allows("anything", loopback, 80));
    }

    #[test]
    fn urls_give_their_authority() {
        assert_eq!(
            url_authority("http://127.0.0.1:8081"),
            Some(("127.0.0.1:8081", 80))
        );
        assert_eq!(
            url_authority("https://evil.example/page?x#y"),
            Some(("evil.example", 443))
        );
        assert_eq!(url_authority("null"), None);
        assert_eq!(url_authority("ftp://x"), None);
        assert_eq!(url_authority("http://user@host/"), None);
    }
}
