//! Email addresses, normalised: trimmed, lower-cased, IDNA (punycode) domain.

use std::fmt;

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    /// Parses and normalises an address; the error says what is wrong.
    pub fn parse(raw: &str) -> Result<Email, &'static str> {
        let s = raw.trim();
        if s.len() > 254 {
            return Err("the address is longer than 254 characters");
        }
        let (local, domain) = s.rsplit_once('@').ok_or("the address has no @")?;
        if local.is_empty() || local.len() > 64 {
            return Err("the part before @ must have 1 to 64 characters");
        }
        if local.chars().any(|c| c.is_whitespace() || c.is_control() || c == '@' || c == '"') {
            return Err("the part before @ contains a character that is not allowed");
        }
        if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
            return Err("the part before @ has a misplaced dot");
        }
        let domain = idna::domain_to_ascii(domain).map_err(|_| "the domain is not a valid domain name")?;
        let labels: Vec<&str> = domain.split('.').collect();
        let valid_labels = labels.len() >= 2
            && labels.iter().all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !valid_labels {
            return Err("the domain is not a valid domain name");
        }
        Ok(Email(format!("{}@{}", local.to_lowercase(), domain)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_trimmed_lower_cased_with_an_idna_domain() {
        assert_eq!(Email::parse("  Ana.Silva@Example.COM ").unwrap().as_str(), "ana.silva@example.com");
        assert_eq!(Email::parse("jose@bücher.de").unwrap().as_str(), "jose@xn--bcher-kva.de");
        assert_eq!(Email::parse("a+tag@sub.example.org").unwrap().as_str(), "a+tag@sub.example.org");
    }

    #[test]
    fn malformed_addresses_are_refused() {
        for bad in [
            "",
            "plain",
            "@example.com",
            "a@",
            "a@localhost",
            "a b@example.com",
            "a@exa mple.com",
            "a..b@example.com",
            "a@-x.com",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad}");
        }
    }
}
