//! Voice calls and their transcript segments.

use parley_domain::call::{
    Analysis, AnsweredBy, Call, CallDirection, CallLatency, CallRecording, CallStatus, EndedReason, MachineDetection,
    RecordingStatus, Speaker, TranscriptSegment, TurnLatency, Word,
};
use parley_domain::validation::Page;
use parley_domain::{Mode, Scope, Timestamp};
use serde_json::{Map, Value};
use sqlx::types::Json;

use super::{Arg, Where, corrupt, versions};
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

pub const VERSION_KEY: &str = "calls";

const COLUMNS: &str = "id, public_id, workspace_id, livemode, agent_id, contact_id, conversation_id, direction, \
    from_address, to_address, status, ended_reason, first_message, max_duration_s, record, metadata, provider, \
    provider_call_id, owner, last_seen_at, created_at, ringing_at, answered_at, ended_at, duration_ms, cost_cents, \
    recording_status, recording_key, recording_duration_ms, transfer_to, channel_id, latency, \
    answered_by, machine_detection, analysis";

/// A stored call, with what only the services need (owner, recording key).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CallRow {
    pub id: i64,
    pub public_id: String,
    pub workspace_id: i64,
    pub livemode: bool,
    pub agent_id: i64,
    pub contact_id: Option<i64>,
    pub conversation_id: Option<i64>,
    pub direction: CallDirection,
    pub from_address: Option<String>,
    pub to_address: String,
    pub status: CallStatus,
    pub ended_reason: Option<String>,
    pub first_message: Option<String>,
    pub max_duration_s: i64,
    pub record: bool,
    pub metadata: Json<Map<String, Value>>,
    pub provider: String,
    pub provider_call_id: Option<String>,
    pub owner: Option<String>,
    pub last_seen_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub ringing_at: Option<Timestamp>,
    pub answered_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    pub duration_ms: Option<i64>,
    pub cost_cents: Option<i64>,
    pub recording_status: RecordingStatus,
    pub recording_key: Option<String>,
    pub recording_duration_ms: Option<i64>,
    pub transfer_to: Option<String>,
    pub channel_id: Option<i64>,
    pub latency: Option<Json<CallLatency>>,
    pub answered_by: Option<AnsweredBy>,
    pub machine_detection: Option<Json<MachineDetection>>,
    pub analysis: Option<Json<Analysis>>,
}

impl CallRow {
    pub fn scope(&self) -> Scope {
        Scope::new(self.workspace_id, Mode::from_livemode(self.livemode))
    }

    pub fn to_api(&self) -> StoreResult<Call> {
        let recording_status = self.recording_status;
        Ok(Call {
            id: self.public_id.clone(),
            agent_id: self.agent_id,
            conversation_id: self.conversation_id,
            contact_id: self.contact_id,
            direction: self.direction,
            from: self.from_address.clone(),
            to: self.to_address.clone(),
            status: self.status,
            ended_reason: self
                .ended_reason
                .as_deref()
                .map(|r| EndedReason::parse(r).ok_or_else(|| corrupt("ended reason", r)))
                .transpose()?,
            created_at: self.created_at,
            ringing_at: self.ringing_at,
            answered_at: self.answered_at,
            ended_at: self.ended_at,
            duration_ms: self.duration_ms,
            cost_cents: self.cost_cents,
            recording: CallRecording {
                status: recording_status,
                duration_ms: self.recording_duration_ms,
                format: (recording_status == RecordingStatus::Available).then(|| "wav".to_owned()),
            },
            metadata: self.metadata.0.clone(),
            provider: self.provider.clone(),
            provider_call_id: self.provider_call_id.clone(),
            transfer_to: self.transfer_to.clone(),
            channel_id: self.channel_id,
            latency: self.latency.as_ref().map(|l| l.0),
            answered_by: self.answered_by,
            machine_detection: self.machine_detection.as_ref().map(|m| m.0.clone()),
            analysis: self.analysis.as_ref().map(|a| a.0.clone()),
        })
    }
}

/// A call to record as `queued`.
#[derive(Debug, Clone)]
pub struct NewCall<'a> {
    pub public_id: &'a str,
    pub agent_id: i64,
    pub contact_id: Option<i64>,
    pub conversation_id: Option<i64>,
    pub from: Option<&'a str>,
    pub to: &'a str,
    pub first_message: Option<&'a str>,
    pub variables: &'a Map<String, Value>,
    pub max_duration_s: i64,
    pub record: bool,
    pub metadata: &'a Map<String, Value>,
    pub provider: &'a str,
    pub owner: &'a str,
    pub direction: CallDirection,
    /// The `voice` channel the call is on.
    pub channel_id: i64,
}

pub async fn insert(c: &mut impl AsHandle, scope: Scope, n: &NewCall<'_>) -> StoreResult<CallRow> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO calls (public_id, workspace_id, livemode, agent_id, contact_id, conversation_id, direction,
            from_address, to_address, status, first_message, variables, max_duration_s, record, metadata, provider,
            owner, last_seen_at, created_at, updated_at, channel_id)
         VALUES ($1, $2, $3, $4, $5, $6, $17, $7, $8, 'queued', $9, $10, $11, $12, $13, $14, $15, $16, $16, $16, $18)
         RETURNING {COLUMNS}"
    ));
    let row: CallRow = fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind(n.public_id)
            .bind_scope(scope)
            .bind(n.agent_id)
            .bind(n.contact_id)
            .bind(n.conversation_id)
            .bind(n.from)
            .bind(n.to)
            .bind(n.first_message)
            .bind(Json(n.variables))
            .bind(n.max_duration_s)
            .bind(n.record)
            .bind(Json(n.metadata))
            .bind(n.provider)
            .bind(n.owner)
            .bind(Timestamp::now())
            .bind(n.direction.as_str())
            .bind(n.channel_id)
    )?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(row)
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, public_id: &str) -> StoreResult<Option<CallRow>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM calls WHERE workspace_id = $1 AND livemode = $2 AND public_id = $3"
    ));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(public_id))?)
}

/// A call by its public id in any workspace (the public id is unique):
/// for work that starts from the id alone, such as a recording left in the
/// spool.
pub async fn find_anywhere(c: &mut impl AsHandle, public_id: &str) -> StoreResult<Option<CallRow>> {
    let sql = sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM calls WHERE public_id = $1"));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind(public_id))?)
}

/// Gives an ended call without a recording the one found after its end
/// (its instance died mid-call); false if it has one or has not ended.
pub async fn attach_recording(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    key: &str,
    duration_ms: i64,
) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE calls SET recording_status = $4, recording_key = $5, recording_duration_ms = $6
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND recording_key IS NULL
               AND status NOT IN ('queued', 'ringing', 'in_progress')",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(RecordingStatus::Available.as_str())
        .bind(key)
        .bind(duration_ms)
    )?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(n > 0)
}

/// Calls of the scope that have not ended.
pub async fn count_live(c: &mut impl AsHandle, scope: Scope) -> StoreResult<i64> {
    let (n,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*) FROM calls WHERE workspace_id = $1 AND livemode = $2
               AND status IN ('queued', 'ringing', 'in_progress')"
        )
        .bind_scope(scope)
    )?;
    Ok(n)
}

/// Moves a live call to `to` (only from a state that may move there),
/// stamping `stamp` (`ringing_at`, `answered_at`) with now; false when it
/// could not move (it had ended, or already moved on).
pub async fn advance(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    to: CallStatus,
    stamp: Option<&'static str>,
) -> StoreResult<bool> {
    let from: Vec<String> = CallStatus::ALL
        .iter()
        .filter_map(|s| CallStatus::parse(s))
        .filter(|s| s.can_move_to(to))
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    if from.is_empty() {
        return Ok(false);
    }
    let set_stamp = stamp.map(|col| format!(", {col} = $5")).unwrap_or_default();
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE calls SET status = $4, updated_at = $5{set_stamp}
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status IN ({})",
        from.join(", ")
    ));
    let n = execute!(c, sqlx::query(sql).bind_scope(scope).bind(id).bind(to.as_str()).bind(Timestamp::now()))?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(n > 0)
}

/// Whether a call of `provider` already has the provider's id `provider_call_id`.
/// Not scoped: a telephony provider serves the whole server, and its call
/// ids are unique across it (a unique index holds them so).
pub async fn provider_call_taken(c: &mut impl AsHandle, provider: &str, provider_call_id: &str) -> StoreResult<bool> {
    let found: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as("SELECT id FROM calls WHERE provider = $1 AND provider_call_id = $2")
            .bind(provider)
            .bind(provider_call_id)
    )?;
    Ok(found.is_some())
}

pub async fn set_provider_call_id(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    provider_call_id: &str,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query("UPDATE calls SET provider_call_id = $4 WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
            .bind(provider_call_id)
    )?;
    Ok(())
}

/// How a call ended.
#[derive(Debug, Clone)]
pub struct Ending {
    pub status: CallStatus,
    pub reason: EndedReason,
    pub ended_at: Timestamp,
    pub duration_ms: i64,
    pub cost_cents: i64,
    pub recording: Option<(String, i64)>,
    /// Where the call was transferred (`transferred` calls).
    pub transfer_to: Option<String>,
    pub latency: Option<CallLatency>,
    /// Answering-machine detection's last word (`None` keeps what is stored).
    pub machine: Option<(AnsweredBy, MachineDetection)>,
}

/// Ends a live call; false if it had already ended (terminal states never change).
pub async fn finish(c: &mut impl AsHandle, scope: Scope, id: i64, e: &Ending) -> StoreResult<bool> {
    let (key, recording_ms) = e.recording.clone().unzip();
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE calls SET status = $4, ended_reason = $5, ended_at = $6, duration_ms = $7, cost_cents = $8,
                recording_status = $9, recording_key = $10, recording_duration_ms = $11, transfer_to = $12, latency = $13, owner = NULL,
                answered_by = COALESCE($14, answered_by), machine_detection = COALESCE($15, machine_detection),
                updated_at = $6
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status IN ('queued', 'ringing', 'in_progress')",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(e.status.as_str())
        .bind(e.reason.as_str())
        .bind(e.ended_at)
        .bind(e.duration_ms)
        .bind(e.cost_cents)
        .bind(if key.is_some() { RecordingStatus::Available.as_str() } else { RecordingStatus::Absent.as_str() })
        .bind(key)
        .bind(recording_ms)
        .bind(&e.transfer_to)
        .bind(e.latency.map(Json))
        .bind(e.machine.as_ref().map(|(by, _)| by.as_str()))
        .bind(e.machine.as_ref().map(|(_, m)| Json(m)))
    )?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(n > 0)
}

/// Stores an ended call's post-call analysis (replacing an earlier one).
pub async fn set_analysis(c: &mut impl AsHandle, scope: Scope, id: i64, analysis: &Analysis) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE calls SET analysis = $4, updated_at = $5 WHERE workspace_id = $1 AND livemode = $2 AND id = $3",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(Json(analysis))
        .bind(Timestamp::now())
    )?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(n > 0)
}

/// Records who picked up a live call, as answering-machine detection judged.
pub async fn set_answered_by(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    by: AnsweredBy,
    detection: &MachineDetection,
) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE calls SET answered_by = $4, machine_detection = $5, updated_at = $6
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status IN ('ringing', 'in_progress')",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(by.as_str())
        .bind(Json(detection))
        .bind(Timestamp::now())
    )?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(n > 0)
}

/// Notes that `owner` still runs its live calls.
pub async fn heartbeat(c: &mut impl AsHandle, owner: &str) -> StoreResult<u64> {
    Ok(execute!(
        c,
        sqlx::query(
            "UPDATE calls SET last_seen_at = $2 WHERE owner = $1 AND status IN ('queued', 'ringing', 'in_progress')"
        )
        .bind(owner)
        .bind(Timestamp::now())
    )?)
}

#[derive(Debug, Clone, Default)]
pub struct CallFilter {
    pub status: Option<CallStatus>,
    pub agent_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub conversation_id: Option<i64>,
    pub direction: Option<CallDirection>,
    pub created_after: Option<Timestamp>,
    pub created_before: Option<Timestamp>,
}

/// Calls newest first, and how many match.
pub async fn list(c: &mut impl AsHandle, scope: Scope, f: &CallFilter, page: Page) -> StoreResult<(Vec<CallRow>, i64)> {
    let mut w = Where::scoped(scope, "c");
    if let Some(s) = f.status {
        w.and("c.status = ?", [Arg::Text(s.as_str().to_owned())]);
    }
    if let Some(a) = f.agent_id {
        w.and("c.agent_id = ?", [Arg::I64(a)]);
    }
    if let Some(id) = f.contact_id {
        w.and("c.contact_id = ?", [Arg::I64(id)]);
    }
    if let Some(id) = f.conversation_id {
        w.and("c.conversation_id = ?", [Arg::I64(id)]);
    }
    if let Some(d) = f.direction {
        w.and("c.direction = ?", [Arg::Text(d.as_str().to_owned())]);
    }
    if let Some(t) = f.created_after {
        w.and("c.created_at >= ?", [Arg::Time(t)]);
    }
    if let Some(t) = f.created_before {
        w.and("c.created_at < ?", [Arg::Time(t)]);
    }
    super::newest_page(c, "calls c", COLUMNS, &w, page).await
}

/// Adds a transcript segment; false if the call has one at its index
/// already (a write retried after its commit went through).
pub async fn add_segment(c: &mut impl AsHandle, call_id: i64, s: &TranscriptSegment) -> StoreResult<bool> {
    let added = execute!(
        c,
        sqlx::query(
            "INSERT INTO call_segments (call_id, idx, speaker, text, start_ms, end_ms, interrupted, words, latency)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (call_id, idx) DO NOTHING",
        )
        .bind(call_id)
        .bind(s.index)
        .bind(s.speaker.as_str())
        .bind(&s.text)
        .bind(s.start_ms)
        .bind(s.end_ms)
        .bind(s.interrupted)
        .bind(Json(&s.words))
        .bind(s.latency.map(Json))
    )?;
    Ok(added == 1)
}

pub async fn segments(c: &mut impl AsHandle, call_id: i64) -> StoreResult<Vec<TranscriptSegment>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        idx: i64,
        speaker: String,
        text: String,
        start_ms: i64,
        end_ms: i64,
        interrupted: bool,
        words: Json<Vec<Word>>,
        latency: Option<Json<TurnLatency>>,
    }
    let rows: Vec<Row> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT idx, speaker, text, start_ms, end_ms, interrupted, words, latency FROM call_segments
             WHERE call_id = $1 ORDER BY idx"
        )
        .bind(call_id)
    )?;
    rows.into_iter()
        .map(|r| {
            Ok(TranscriptSegment {
                index: r.idx,
                speaker: Speaker::parse(&r.speaker).ok_or_else(|| corrupt("speaker", &r.speaker))?,
                text: r.text,
                start_ms: r.start_ms,
                end_ms: r.end_ms,
                interrupted: r.interrupted,
                words: r.words.0,
                latency: r.latency.map(|l| l.0),
            })
        })
        .collect()
}

/// Marks a segment interrupted (the caller spoke over it).
pub async fn mark_interrupted(c: &mut impl AsHandle, call_id: i64, index: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query("UPDATE call_segments SET interrupted = $3 WHERE call_id = $1 AND idx = $2")
            .bind(call_id)
            .bind(index)
            .bind(true)
    )?;
    Ok(())
}

/// Gives `from`'s calls to `to` (a contact merge).
pub async fn move_contact(c: &mut impl AsHandle, scope: Scope, from: i64, to: i64) -> StoreResult<()> {
    super::repoint_contact(c, scope, "calls", from, Some(to)).await?;
    versions::bump(c, scope, VERSION_KEY).await
}

/// Detaches a deleted contact from its calls.
pub async fn clear_contact(c: &mut impl AsHandle, scope: Scope, contact_id: i64) -> StoreResult<()> {
    super::repoint_contact(c, scope, "calls", contact_id, None).await?;
    versions::bump(c, scope, VERSION_KEY).await
}

/// Sets the contact of every call to `to_address` that has none.
pub async fn link_address(c: &mut impl AsHandle, scope: Scope, to_address: &str, contact_id: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE calls SET contact_id = $4
             WHERE workspace_id = $1 AND livemode = $2 AND to_address = $3 AND contact_id IS NULL",
        )
        .bind_scope(scope)
        .bind(to_address)
        .bind(contact_id)
    )?;
    versions::bump(c, scope, VERSION_KEY).await
}
