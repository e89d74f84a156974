//! `/api/v1/speech-engines`: the speech engines calls can use.

use axum::Json;
use axum::extract::State;
use parley_domain::call::SpeechEngineInfo;
use parley_services::calls;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::ApiError;
use crate::extract::{Auth, ListQuery, NoFilter};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_speech_engines))
}

/// List the configured speech engines.
///
/// Speech-to-text (`stt`) and text-to-speech (`tts`) engines, by name: the
/// built-in `espeak` voice (always there) and each `[speech.stt.NAME]` and
/// `[speech.tts.NAME]` of the server's configuration, with its kind and its
/// model or voice. Addresses and keys are never shown.
#[utoipa::path(
    get, path = "/api/v1/speech-engines", tag = "Calls",
    params(PageParams),
    responses((status = 200, body = Items<SpeechEngineInfo>))
)]
async fn list_speech_engines(
    _auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<SpeechEngineInfo>>, ApiError> {
    Ok(Json(Items::new(calls::speech_engines(&s.services, q.page), q.page)))
}
