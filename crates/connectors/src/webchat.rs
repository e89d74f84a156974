//! The `webchat` channel: the widget on your pages. Visitors talk over the
//! widget's socket, so the channel takes no inbound webhooks.

use futures::future::BoxFuture;
use parley_domain::channel::ChannelType;
use parley_domain::validation::{LocPart, Parsed, boolean, list_of, string};
use serde_json::Value;

use crate::{Connector, Delivered, Delivery};

pub(crate) struct WebchatConnector;

impl Connector for WebchatConnector {
    fn kind(&self) -> ChannelType {
        ChannelType::Webchat
    }
    fn secret_settings(&self) -> &'static [&'static str] {
        &[]
    }
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>> {
        Some(match name {
            // Pages allowed to open the chat ("https://shop.example"), or ["*"].
            "allowed_origins" => list_of(20, |v, l| string(1, 200)(v, l))(value, at)
                .map(|o| Value::Array(o.into_iter().map(Value::String).collect())),
            "title" => string(1, 100)(value, at).map(Value::String),
            "greeting" => string(1, 500)(value, at).map(Value::String),
            "calls" => boolean()(value, at).map(Value::Bool),
            _ => return None,
        })
    }
    fn settings_schema(&self) -> utoipa::openapi::Object {
        use parley_domain::schema::{boolean, nullable, nullable_array, string, strings};
        parley_domain::schema::closed_object(vec![
            (
                "allowed_origins",
                nullable_array(strings(20, 1, 200)).into(),
                "Pages allowed to open the chat (\"https://shop.example\"), or [\"*\"]; default any.",
            ),
            ("title", nullable(string(1, 100).build()).into(), "The widget's title."),
            ("greeting", nullable(string(1, 500).build()).into(), "Shown before the first message."),
            ("calls", nullable(boolean()).into(), "Offer visitors web calls (default false)."),
        ])
    }
    fn webhook_paths(&self) -> &'static [(&'static str, &'static str)] {
        &[("The widget's script (add data-channel with the channel's address)", "/webchat/widget.js")]
    }
    fn signs_traffic(&self) -> bool {
        false
    }
    fn public_prefix(&self) -> &'static str {
        "wc"
    }
    /// The message is stored; the visitor's socket shows it now or when
    /// they come back.
    fn deliver<'a>(&'a self, _: Delivery<'a>) -> BoxFuture<'a, Delivered> {
        Box::pin(async { Delivered::Sent { external_id: None } })
    }
}
