//! The URLs WebFetch takes, as its permission rules and its fetcher both read them.

use http::Uri;
use http::uri::Scheme;

/// The longest URL WebFetch takes, in bytes (Claude Code 2.1.197's limit).
pub const MAX_URL_LENGTH: usize = 2000;

/// A URL WebFetch may fetch: always `https` (an `http` URL is upgraded, so a page is never
/// read, nor its address sent, in clear text), with a host and no user name or password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchUrl {
    /// The URL to request.
    pub uri: Uri,
    /// Its host in lower case without a trailing dot; an address in its canonical form (an
    /// IPv6 address in brackets, `[::1]` for `[0::1]`; an IPv4-mapped one as the IPv4
    /// address, `1.2.3.4` for `[::ffff:1.2.3.4]`), so a rule naming an address matches
    /// however the URL spells it.
    pub host: String,
}

impl FetchUrl {
    /// Reads `raw`.
    ///
    /// # Errors
    ///
    /// A sentence naming what is wrong: longer than [`MAX_URL_LENGTH`], not a URL, a
    /// scheme other than `http` or `https`, no host, or credentials in it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.len() > MAX_URL_LENGTH {
            return Err(format!(
                "the URL is {} bytes long; at most {MAX_URL_LENGTH} are taken",
                raw.len()
            ));
        }
        let uri: Uri = raw
            .parse()
            .map_err(|error| format!("{raw:?} is not a valid URL: {error}"))?;
        let scheme = uri.scheme_str().map(str::to_ascii_lowercase);
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Err(format!(
                "{raw:?} is not an http or https URL (write it as https://host/path)"
            ));
        }
        let Some(authority) = uri.authority() else {
            return Err(format!("{raw:?} names no host"));
        };
        if authority.as_str().contains('@') {
            return Err(format!(
                "{raw:?} carries a user name or password; they are never sent"
            ));
        }
        let host = authority.host().trim_end_matches('.').to_ascii_lowercase();
        if host.is_empty() {
            return Err(format!("{raw:?} names no host"));
        }
        let host = canonical_host(host);
        let mut parts = uri.into_parts();
        parts.scheme = Some(Scheme::HTTPS);
        if parts.path_and_query.is_none() {
            parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
        }
        // An upgraded URL keeps an explicit port (a server on :8080 is asked over TLS there).
        let uri = Uri::from_parts(parts).map_err(|error| format!("{raw:?}: {error}"))?;
        Ok(Self { uri, host })
    }
}

/// The IPv4 address an IPv6 address reaches: mapped, translated, compatible, NAT64 or 6to4
/// (as `provider::embedded_ipv4` reads them, which decides where a fetch connects).
fn embedded_ipv4(address: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let v4 = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        std::net::Ipv4Addr::new(a, b, c, d)
    };
    match address.segments() {
        [0, 0, 0, 0, 0, 0xffff, high, low]
        | [0, 0, 0, 0, 0xffff, 0, high, low]
        | [0x64, 0xff9b, 0, 0, 0, 0, high, low] => Some(v4(high, low)),
        [0, 0, 0, 0, 0, 0, high, low] if high != 0 || low > 1 => Some(v4(high, low)),
        [0x2002, high, low, ..] => Some(v4(high, low)),
        _ => None,
    }
}

/// `host` as rules compare it: an address written any way in its one form.
pub(crate) fn canonical_host(host: String) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => match embedded_ipv4(v6) {
            Some(v4) => v4.to_string(),
            None => format!("[{v6}]"),
        },
        Ok(std::net::IpAddr::V4(v4)) => v4.to_string(),
        Err(_) => host,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn urls_are_upgraded_and_their_hosts_named() {
        let url = FetchUrl::parse("http://Docs.Example.COM./a?b=1").unwrap();
        assert_eq!(url.uri.to_string(), "https://Docs.Example.COM./a?b=1");
        assert_eq!(url.host, "docs.example.com");
        let url = FetchUrl::parse(" https://[::1]:8443 ").unwrap();
        assert_eq!(url.uri.to_string(), "https://[::1]:8443/");
        assert_eq!(url.host, "[::1]");
        for bad in [
            "ftp://example.com/",
            "file:///etc/passwd",
            "example.com/page",
            "https://user:secret@example.com/",
            "https://",
            "not a url",
        ] {
            assert!(FetchUrl::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(FetchUrl::parse("https://[0::1]/").unwrap().host, "[::1]");
        for spelling in [
            "[::FFFF:1.2.3.4]",
            "[::1.2.3.4]",
            "[64:ff9b::102:304]",
            "[::ffff:0:102:304]",
        ] {
            let url = FetchUrl::parse(&format!("https://{spelling}/")).unwrap();
            assert_eq!(url.host, "1.2.3.4", "{spelling}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LENGTH));
        assert!(FetchUrl::parse(&long).unwrap_err().contains("at most 2000"));
    }
}
