//! Extractors: each parses one part of the request into a typed value, or
//! rejects the request with the error shape of docs/api.md ("Errors").

pub(crate) mod auth;
mod body;
mod idempotency;
mod path;
mod query;

pub use auth::{Auth, ClientIp};
pub use body::{FromBody, JsonBody};
pub use idempotency::{Idempotency, RequiredIdempotency, answer_response, write};
pub use path::{Ids, PathText};
pub use query::{FromQuery, ListQuery, NoFilter, Params};
