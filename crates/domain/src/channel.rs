//! Channel connections: how a workspace reaches people on one channel.

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::Timestamp;

string_enum!(
    /// The kinds of channel connection.
    ChannelType {
        /// Your own system: signed HTTP in both directions.
        Api = "api",
        /// A chat widget on your web pages, over a WebSocket.
        Webchat = "webchat",
        Email = "email",
        Sms = "sms",
        Whatsapp = "whatsapp",
        Telegram = "telegram",
        Voice = "voice",
    }
);

string_enum!(
    ChannelStatus {
        Active = "active",
        /// Turned off by a user: no traffic in or out.
        Disabled = "disabled",
        /// The provider refused it (bad credentials, for example).
        Error = "error",
    }
);

/// A channel connection as the API shows it. Secret settings are never
/// shown: `config` holds the others, and `secrets_set` names the secret
/// ones that have a value.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Channel {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: ChannelType,
    pub name: String,
    /// The channel's own address: the webchat or api channel's public id
    /// (used in `/webchat/{public_id}`), later a phone number or email.
    pub address: String,
    /// The id a provider's webhooks name the channel by: paste
    /// `{public_url}/hooks/twilio/{public_id}/inbound` (sms, whatsapp) into
    /// the provider's console; Telegram's hook is registered by Parley.
    pub public_id: String,
    pub status: ChannelStatus,
    /// Why the channel is in `error` (its provider refused its
    /// credentials); null otherwise.
    pub status_reason: Option<String>,
    #[schema(value_type = Object)]
    pub config: Map<String, Value>,
    /// Secret settings that are set (their values are write-only).
    pub secrets_set: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
