//! Domain types for Parley.
//!
//! Everything here is pure: raw input is parsed into types that cannot hold an
//! invalid value (`ApiKey`, `Slug`, `IdempotencyKey`, …), state machines decide
//! which moves are allowed, and `validation` turns untrusted JSON into typed
//! input while collecting every fault in the 422 of docs/api.md shape.

/// What every `string_enum!` is: parsers take any of them (`validation::enum_value`).
pub trait StringEnum: Sized + Copy + 'static {
    const ALL: &'static [&'static str];
    fn parse(s: &str) -> Option<Self>;
    fn as_str(self) -> &'static str;
}

/// A closed set of lower-case string values, the one way enums are written:
/// the enum (serde and OpenAPI by its values), `ALL` for 422 messages,
/// `as_str`/`parse`, `Display`, and — behind the `sqlx` feature — the
/// database encoding as text, so that a stored value that is not one of
/// them is a decode error, never a silent default.
///
/// The values are `tt`, not `literal`: a `literal` fragment reaches derive
/// macros wrapped in an invisible group, which utoipa does not read as a
/// rename (the document then showed the variant names instead of the values).
macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $s:tt),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize, ::utoipa::ToSchema)]
        pub enum $name { $($(#[$vm])* #[serde(rename = $s)] $variant),+ }

        impl $name {
            pub const ALL: &'static [&'static str] = &[$($s),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s { $($s => Some($name::$variant),)+ _ => None }
            }
        }

        impl crate::StringEnum for $name {
            const ALL: &'static [&'static str] = &[$($s),+];
            fn parse(s: &str) -> Option<Self> {
                $name::parse(s)
            }
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[cfg(feature = "sqlx")]
        impl<DB: ::sqlx::Database> ::sqlx::Type<DB> for $name
        where
            str: ::sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as ::sqlx::Type<DB>>::type_info()
            }
            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as ::sqlx::Type<DB>>::compatible(ty)
            }
        }

        #[cfg(feature = "sqlx")]
        impl<'q, DB: ::sqlx::Database> ::sqlx::Encode<'q, DB> for $name
        where
            &'q str: ::sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as ::sqlx::Database>::ArgumentBuffer,
            ) -> Result<::sqlx::encode::IsNull, ::sqlx::error::BoxDynError> {
                <&'q str as ::sqlx::Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }

        #[cfg(feature = "sqlx")]
        impl<'r, DB: ::sqlx::Database> ::sqlx::Decode<'r, DB> for $name
        where
            &'r str: ::sqlx::Decode<'r, DB>,
        {
            fn decode(value: <DB as ::sqlx::Database>::ValueRef<'r>) -> Result<Self, ::sqlx::error::BoxDynError> {
                let s = <&'r str as ::sqlx::Decode<'r, DB>>::decode(value)?;
                $name::parse(s).ok_or_else(|| format!("{s:?} is not a {}", stringify!($name)).into())
            }
        }
    };
}

pub mod agent;
pub mod api_key;
pub mod billing;
pub mod call;
pub mod channel;
pub mod contact;
pub mod conversation;
pub mod crypto;
pub mod email;
pub mod event;
pub mod idempotency;
pub mod ids;
pub mod jwt;
pub mod knowledge;
pub mod oauth;
pub mod overview;
pub mod prompt;
pub mod schema;
pub mod scope;
pub mod search;
pub mod slug;
pub mod sms;
pub mod time;
pub mod twilio;
pub mod user;
pub mod validation;
pub mod webhook;
pub mod workspace;

pub use scope::{Mode, Scope};
pub use time::Timestamp;
