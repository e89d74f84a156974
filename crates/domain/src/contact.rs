//! Contacts: one per person, however the person reaches the workspace.
//! Phone numbers and emails are normalised so that format variants of one
//! address are one value, and channel addresses are normalised per channel.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::Timestamp;
use crate::channel::ChannelType;
use crate::email::Email;

/// A phone number in E.164 form (`+14155550100`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Phone(String);

/// A region for numbers written without a country code (ISO 3166 alpha-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region(phonenumber::country::Id);

impl FromStr for Region {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim()
            .to_ascii_uppercase()
            .parse::<phonenumber::country::Id>()
            .map(Region)
            .map_err(|_| format!("{s:?} is not an ISO 3166 alpha-2 region code such as US or GB"))
    }
}

impl Default for Region {
    fn default() -> Self {
        Region(phonenumber::country::Id::US)
    }
}

impl Phone {
    /// Parses a number as people write it ("(415) 555-0100", "+44 20 7946 0958",
    /// "0044 …", "tel:+1-415-…"), reading national formats in `region`.
    /// The error says what is wrong.
    pub fn parse(raw: &str, region: Region) -> Result<Phone, &'static str> {
        let s = raw.trim();
        let s = s.strip_prefix("tel:").unwrap_or(s);
        if s.is_empty() {
            return Err("the phone number is empty");
        }
        if s.len() > 40 {
            return Err("the phone number is longer than 40 characters");
        }
        if s.chars().any(|c| c.is_alphabetic() && !matches!(c, 'x' | 'X' | 'e' | 'E' | 't' | 'T')) {
            return Err("the phone number contains letters");
        }
        // "00" is the international prefix in most of the world.
        let international;
        let s = match s.strip_prefix("00") {
            Some(rest) if rest.chars().next().is_some_and(|c| c.is_ascii_digit() && c != '0') => {
                international = format!("+{rest}");
                international.as_str()
            }
            _ => s,
        };
        let number = phonenumber::parse(Some(region.0), s).map_err(|_| "not a phone number")?;
        if !phonenumber::is_valid(&number) {
            return Err("not a valid phone number for its country");
        }
        Ok(Phone(number.format().mode(phonenumber::Mode::E164).to_string()))
    }

    /// Loads the numbering plans, which the first parse otherwise does
    /// (about 0.1 s), so that a server's first inbound message after a
    /// start does not wait for it.
    pub fn load_numbering_plans(region: Region) {
        let _ = Phone::parse("+14155550100", region);
    }

    /// Reads back a stored E.164 value without re-validating it.
    pub fn from_e164(s: String) -> Phone {
        Phone(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Phone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The lower-case form of a display name with whitespace collapsed, or
/// `None` when nothing is left.
pub fn canonical_name(display_name: &str) -> Option<String> {
    let collapsed = display_name.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    (!collapsed.is_empty()).then_some(collapsed)
}

string_enum!(
    /// How a contact came to exist.
    Origin {
        /// Created through the API or the dashboard.
        Manual = "manual",
        /// Created from an address seen in traffic.
        Discovered = "discovered",
        /// Created by a CSV import.
        Import = "import",
    }
);

/// A contact's address on one channel, e.g. `sms` `+14155550100`.
///
/// `address` is normalised for the channel: E.164 for sms, whatsapp and
/// voice (a phone number in any common format is accepted); an email
/// address for email, normalised; as given (trimmed) otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub channel: ChannelType,
    pub address: String,
    /// An email address a message claimed (`From`) without the receiving
    /// server authenticating it: kept apart from the same address proven,
    /// never merged into a contact by it. Shown only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
}

/// One shape per kind of address, so that the document says what each
/// channel's address must be; `unverified` on what Parley shows.
fn identity_schema(shown: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use crate::schema::{string, string_enum};
    use utoipa::openapi::SchemaFormat;
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Type};
    let shape = |channels: &[&str], address: ObjectBuilder, email: bool| {
        let mut shape = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("channel", string_enum(channels))
            .required("channel")
            .property("address", address)
            .required("address");
        if shown && email {
            let flag = ObjectBuilder::new().schema_type(Type::Boolean).description(Some(
                "Present (true) on an address a message claimed without the receiving server authenticating it",
            ));
            shape = shape.property("unverified", flag);
        }
        shape.additional_properties(Some(AdditionalProperties::FreeForm(false)))
    };
    OneOfBuilder::new()
        .description(Some("A contact's address on one channel."))
        .item(shape(
            &["sms", "whatsapp", "voice"],
            string(1, 255).format(Some(SchemaFormat::Custom("phone".into()))),
            false,
        ))
        .item(shape(&["email"], string(1, 255).format(Some(SchemaFormat::Custom("email".into()))), true))
        // Not blank. U+0085 is spelled out: ECMA's `\s` lacks it, but the
        // address is trimmed of it.
        .item(shape(&["webchat", "telegram", "api"], string(1, 255).pattern(Some(r"[^\s\u0085]")), false))
        .into()
}

impl utoipa::PartialSchema for Identity {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        identity_schema(true)
    }
}

impl utoipa::ToSchema for Identity {}

/// An identity as a request writes it (never `unverified`: what a person or
/// program states is taken as proven).
pub struct IdentityInput;

impl utoipa::PartialSchema for IdentityInput {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        identity_schema(false)
    }
}

impl utoipa::ToSchema for IdentityInput {}

impl Identity {
    /// Normalises `address` for `channel`; the error says what is wrong
    /// (and which 422 type applies).
    pub fn parse(channel: ChannelType, address: &str, region: Region) -> Result<Identity, (&'static str, String)> {
        let address = match channel {
            ChannelType::Sms | ChannelType::Whatsapp | ChannelType::Voice => {
                Phone::parse(address, region).map_err(|m| ("value_error.phone", m.to_owned()))?.0
            }
            ChannelType::Email => {
                Email::parse(address).map_err(|m| ("value_error.email", m.to_owned()))?.as_str().to_owned()
            }
            _ => {
                let a = address.trim();
                if a.is_empty() || a.chars().count() > 255 {
                    return Err(("value_error.string", "the address must have 1 to 255 characters".to_owned()));
                }
                a.to_owned()
            }
        };
        Ok(Identity { channel, address, unverified: false })
    }
}

/// A contact as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Contact {
    pub id: i64,
    pub display_name: String,
    /// The lower-case form of the name, whitespace collapsed.
    pub canonical_name: Option<String>,
    /// E.164.
    pub normalized_phone: Option<String>,
    /// Trimmed, lower-cased, IDNA domain.
    pub normalized_email: Option<String>,
    pub avatar_url: Option<String>,
    pub notes: Option<String>,
    pub tags: Vec<String>,
    pub origin: Origin,
    pub identities: Vec<Identity>,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e164(raw: &str, region: &str) -> Result<String, &'static str> {
        Phone::parse(raw, region.parse().unwrap()).map(|p| p.0)
    }

    #[test]
    fn real_world_formats_normalise_to_one_e164_number() {
        for raw in [
            "(415) 555-0100",
            "+1 415 555 0100",
            "415.555.0100",
            "1-415-555-0100",
            "+1 (415) 555-0100",
            "tel:+1-415-555-0100",
            "001 415 555 0100",
            "4155550100",
        ] {
            assert_eq!(e164(raw, "US").as_deref(), Ok("+14155550100"), "{raw}");
        }
        for raw in ["020 7946 0958", "+44 20 7946 0958", "0044 20 7946 0958", "(020) 7946-0958"] {
            assert_eq!(e164(raw, "GB").as_deref(), Ok("+442079460958"), "{raw}");
        }
        for raw in ["030 901820", "+49 30 901820", "0049 30 901820"] {
            assert_eq!(e164(raw, "DE").as_deref(), Ok("+4930901820"), "{raw}");
        }
        // A number with its country code is read the same whatever the region.
        assert_eq!(e164("+44 20 7946 0958", "US").as_deref(), Ok("+442079460958"));
    }

    #[test]
    fn invalid_numbers_say_what_is_wrong() {
        assert_eq!(e164("12", "US"), Err("not a phone number"));
        assert_eq!(e164("+1 123 456 7890", "US"), Err("not a valid phone number for its country"));
        assert_eq!(e164("call me", "US"), Err("the phone number contains letters"));
        assert_eq!(e164("", "US"), Err("the phone number is empty"));
        assert!(e164("+1 415 555 01", "US").is_err());
    }

    #[test]
    fn canonical_names_are_lower_case_with_collapsed_whitespace() {
        assert_eq!(canonical_name("  Ana   María\tLópez "), Some("ana maría lópez".into()));
        assert_eq!(canonical_name("   "), None);
    }

    #[test]
    fn identities_normalise_per_channel() {
        let us = Region::default();
        assert_eq!(Identity::parse(ChannelType::Sms, "(415) 555-0100", us).unwrap().address, "+14155550100");
        assert_eq!(Identity::parse(ChannelType::Email, " Ana@Example.COM ", us).unwrap().address, "ana@example.com");
        assert_eq!(Identity::parse(ChannelType::Telegram, " 12345 ", us).unwrap().address, "12345");
        assert_eq!(Identity::parse(ChannelType::Voice, "nope", us).unwrap_err().0, "value_error.phone");
    }

    #[test]
    fn regions_parse_case_insensitively() {
        assert!("gb".parse::<Region>().is_ok());
        assert!("XX".parse::<Region>().is_err());
    }
}
