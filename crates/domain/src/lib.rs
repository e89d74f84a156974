//! Domain types for Parley.
//!
//! Everything here is pure: raw input is parsed into types that cannot hold an
//! invalid value (`ApiKey`, `Slug`, `IdempotencyKey`, …), state machines decide
//! which moves are allowed, and `validation` turns untrusted JSON into typed
//! input while collecting every fault in the SPEC's 422 shape.

/// A closed set of lower-case string values: the enum, its `ALL` list for
/// 422 messages, and `as_str`/`parse`. The values are `tt`, not `literal`:
/// a `literal` fragment reaches derive macros wrapped in an invisible group,
/// which utoipa does not read as a rename (the document then showed the
/// variant names instead of the values).
macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $s:tt),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize, ::utoipa::ToSchema)]
        pub enum $name { $(#[serde(rename = $s)] $variant),+ }

        impl $name {
            pub const ALL: &'static [&'static str] = &[$($s),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s { $($s => Some($name::$variant),)+ _ => None }
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
pub mod jwt;
pub mod prompt;
pub mod schema;
pub mod scope;
pub mod search;
pub mod slug;
pub mod time;
pub mod user;
pub mod validation;
pub mod webhook;
pub mod workspace;

pub use scope::{Mode, Scope};
pub use time::Timestamp;
