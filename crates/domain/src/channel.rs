//! Channel connections: how a workspace reaches people on one channel.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::Timestamp;

/// The kinds of channel connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChannelType {
    /// Your own system: signed HTTP in both directions.
    Api,
    /// A chat widget on your web pages, over a WebSocket.
    Webchat,
    Email,
    Sms,
    Whatsapp,
    Telegram,
    Voice,
}

impl ChannelType {
    pub const ALL: &'static [&'static str] = &["api", "webchat", "email", "sms", "whatsapp", "telegram", "voice"];

    pub fn as_str(self) -> &'static str {
        match self {
            ChannelType::Api => "api",
            ChannelType::Webchat => "webchat",
            ChannelType::Email => "email",
            ChannelType::Sms => "sms",
            ChannelType::Whatsapp => "whatsapp",
            ChannelType::Telegram => "telegram",
            ChannelType::Voice => "voice",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "api" => Some(ChannelType::Api),
            "webchat" => Some(ChannelType::Webchat),
            "email" => Some(ChannelType::Email),
            "sms" => Some(ChannelType::Sms),
            "whatsapp" => Some(ChannelType::Whatsapp),
            "telegram" => Some(ChannelType::Telegram),
            "voice" => Some(ChannelType::Voice),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChannelStatus {
    Active,
    /// Turned off by a user: no traffic in or out.
    Disabled,
    /// The provider refused it (bad credentials, for example).
    Error,
}

impl ChannelStatus {
    pub const ALL: &'static [&'static str] = &["active", "disabled", "error"];

    pub fn as_str(self) -> &'static str {
        match self {
            ChannelStatus::Active => "active",
            ChannelStatus::Disabled => "disabled",
            ChannelStatus::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(ChannelStatus::Active),
            "disabled" => Some(ChannelStatus::Disabled),
            "error" => Some(ChannelStatus::Error),
            _ => None,
        }
    }
}

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
    pub status: ChannelStatus,
    #[schema(value_type = Object)]
    pub config: Map<String, Value>,
    /// Secret settings that are set (their values are write-only).
    pub secrets_set: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
