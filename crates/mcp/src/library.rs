//! Resources and prompts, where they fit: call transcripts and recording
//! links as resources (`parley://calls/{call_id}/transcript`,
//! `…/recording`), prompt blocks as prompts (named by slug, their
//! variables as arguments). Both act on the credential's own workspace and
//! mode, through the same services as the REST API.

use std::collections::BTreeMap;

use parley_domain::Scope;
use parley_domain::prompt::{RenderError, render};
use parley_domain::validation::Page;
use parley_services::agents::prompt_blocks::{self, BlockFilter};
use parley_services::calls::{self, CallFilter};
use parley_services::{ServiceError, Services};
use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult, Resource, ResourceContents,
    ResourceTemplate, Role,
};

const SCHEME: &str = "parley://calls/";

/// The resource templates: a call's transcript and its recording link.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("parley://calls/{call_id}/transcript", "call_transcript")
            .with_title("A call's transcript")
            .with_description(
                "The call's transcript segments (speaker, text, times), as GET /api/v1/calls/{call_id}/transcript.",
            )
            .with_mime_type("application/json"),
        ResourceTemplate::new("parley://calls/{call_id}/recording", "call_recording")
            .with_title("A link to a call's recording")
            .with_description(
                "A signed, expiring link to the call's stereo WAV recording, as GET /api/v1/calls/{call_id}/recording.",
            )
            .with_mime_type("application/json"),
    ]
}

/// The transcripts of the scope's 50 most recent calls.
pub async fn resources(svc: &Services, scope: Scope) -> Result<Vec<Resource>, ErrorData> {
    let (found, _) =
        calls::list(svc, scope, &CallFilter::default(), Page { limit: 50, offset: 0 }).await.map_err(internal)?;
    Ok(found
        .into_iter()
        .map(|call| {
            Resource::new(format!("{SCHEME}{}/transcript", call.id), format!("transcript of {}", call.id))
                .with_title(format!("Transcript of the call to {} ({})", call.to, call.created_at))
                .with_mime_type("application/json")
        })
        .collect())
}

/// Reads `uri`; an unknown one, or a call of another scope, is the same
/// "resource not found".
pub async fn read(svc: &Services, scope: Scope, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let not_found = || ErrorData::resource_not_found(format!("No resource {uri}"), None);
    let rest = uri.strip_prefix(SCHEME).ok_or_else(not_found)?;
    let (call_id, what) = rest.split_once('/').ok_or_else(not_found)?;
    let value = match what {
        "transcript" => calls::transcript(svc, scope, call_id).await.map(|t| serde_json::to_value(t)),
        "recording" => calls::recording(svc, scope, call_id).await.map(|r| serde_json::to_value(r)),
        _ => return Err(not_found()),
    };
    let value = match value {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return Err(ErrorData::internal_error(e.to_string(), None)),
        Err(ServiceError::NotFound { .. }) => return Err(not_found()),
        Err(e) => return Err(internal(e)),
    };
    let text = value.to_string();
    Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type("application/json")]))
}

/// Prompt blocks: the scope's first 200, by slug.
async fn blocks(svc: &Services, scope: Scope) -> Result<Vec<parley_domain::prompt::PromptBlock>, ErrorData> {
    let filter = BlockFilter { kind: None, q: None };
    Ok(prompt_blocks::list(svc, scope, &filter, Page { limit: Page::MAX_LIMIT, offset: 0 }).await.map_err(internal)?.0)
}

/// The prompt blocks as prompts, their variables as required arguments.
pub async fn prompts(svc: &Services, scope: Scope) -> Result<Vec<Prompt>, ErrorData> {
    Ok(blocks(svc, scope)
        .await?
        .into_iter()
        .map(|b| {
            let arguments = b.variables.iter().map(|v| PromptArgument::new(v.clone()).with_required(true)).collect();
            Prompt::new(
                b.slug.clone(),
                Some(format!("Prompt block \"{}\" ({}), version {}", b.name, b.kind.as_str(), b.version)),
                Some(arguments),
            )
            .with_title(b.name)
        })
        .collect())
}

/// The block named `slug`, rendered with `arguments`.
pub async fn get(
    svc: &Services,
    scope: Scope,
    slug: &str,
    arguments: BTreeMap<String, String>,
) -> Result<GetPromptResult, ErrorData> {
    let block = blocks(svc, scope)
        .await?
        .into_iter()
        .find(|b| b.slug == slug)
        .ok_or_else(|| ErrorData::invalid_params(format!("No prompt named {slug}"), None))?;
    let text = render(&block.content, &arguments).map_err(|e| match e {
        RenderError::Missing(names) => {
            ErrorData::invalid_params(format!("Missing arguments: {}", names.join(", ")), None)
        }
        other => ErrorData::internal_error(format!("{other:?}"), None),
    })?;
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).with_description(block.name))
}

fn internal(e: ServiceError) -> ErrorData {
    tracing::error!(error = %e, "an MCP resource or prompt failed");
    ErrorData::internal_error("Internal server error", None)
}
