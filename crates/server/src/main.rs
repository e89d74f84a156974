//! `parley`: the server and its administration commands. Every command
//! except `serve` prints one JSON document on stdout; errors print
//! `{"error": "..."}` on stderr and exit with status 1.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use parley_domain::Mode;
use parley_domain::ids::{ApiKeyId, WorkspaceId};
use parley_domain::user::Role;
use parley_server::{Settings, bootstrap_banner, init_logging, open_database, serve, shutdown_signal};
use parley_services::ServiceError;
use parley_services::tenancy::members;
use parley_services::tenancy::workspaces::{self, NewKey};
use serde_json::json;

#[derive(Parser)]
#[command(name = "parley", version, about = "Self-hosted API for AI agents, voice calls and messaging")]
struct Cli {
    /// Configuration file (default: ./parley.toml if it exists).
    #[arg(long, global = true, env = "PARLEY_CONFIG")]
    config: Option<PathBuf>,
    /// Database URL: sqlite://PATH or postgres://… (overrides the configuration).
    #[arg(long, global = true)]
    database_url: Option<String>,
    /// Create the SQLite database if it does not exist. Administration
    /// commands refuse a missing one otherwise (`serve` always creates it).
    #[arg(long, global = true)]
    create: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server (migrates first; creates a Default workspace on first start).
    Serve {
        /// Address to listen on, e.g. 0.0.0.0:8080.
        #[arg(long)]
        listen: Option<String>,
    },
    /// Apply database migrations and exit.
    Migrate,
    /// Copy a SQLite database to a new file while the server keeps running
    /// (a consistent snapshot, integrity-checked). Restore by serving the
    /// copy (docs/operations.md). PostgreSQL: use pg_dump.
    Backup {
        /// The file to write; it must not exist.
        #[arg(long)]
        to: PathBuf,
    },
    /// Manage workspaces.
    Workspace {
        #[command(subcommand)]
        command: WorkspaceCommand,
    },
    /// Manage API keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Manage users (dashboard logins).
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Manage the keys that sign dashboard access tokens.
    SigningKey {
        #[command(subcommand)]
        command: SigningKeyCommand,
    },
    /// Manage balances.
    Billing {
        #[command(subcommand)]
        command: BillingCommand,
    },
    /// Print the OpenAPI document.
    Openapi,
    /// Read one knowledge document from standard input (the server runs
    /// this as a child process, under limits; see `parley_extract::child`).
    #[command(hide = true)]
    ExtractDocument {
        #[arg(long)]
        content_type: String,
        #[arg(long)]
        max_chars: usize,
        #[arg(long)]
        max_inflated_bytes: usize,
        #[arg(long)]
        seconds: u64,
        #[arg(long)]
        memory_bytes: u64,
    },
}

#[derive(Subcommand)]
enum BillingCommand {
    /// Add credit to a workspace's live (or test) balance.
    Credit {
        #[arg(long)]
        workspace: i64,
        /// Whole cents, 1 to 100,000,000.
        #[arg(long)]
        cents: i64,
        #[arg(long, value_enum, default_value_t = ModeArg::Live)]
        mode: ModeArg,
        #[arg(long, default_value = "Credit (CLI)")]
        description: String,
    },
    /// Check that every balance equals the sum of its ledger entries, and
    /// every held amount the sum of its holds. Exits with 1 if not.
    Verify,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user; the password is read from standard input.
    Create {
        #[arg(long)]
        email: String,
        /// Read the password from standard input (one line).
        #[arg(long, required = true)]
        password_stdin: bool,
        /// Add the user to this workspace…
        #[arg(long, requires = "role")]
        workspace: Option<i64>,
        /// …with this role.
        #[arg(long, value_enum, requires = "workspace")]
        role: Option<RoleArg>,
    },
    /// Print a one-time link (valid for an hour) that sets a new password.
    /// Parley sends no email: give the link to the user yourself.
    ResetPassword {
        #[arg(long)]
        email: String,
    },
    /// Invite someone to a workspace: prints a one-time link (valid for 7
    /// days) that creates their account, or adds an existing one.
    Invite {
        #[arg(long)]
        workspace: i64,
        #[arg(long)]
        email: String,
        #[arg(long, value_enum, default_value_t = RoleArg::Member)]
        role: RoleArg,
    },
}

#[derive(Subcommand)]
enum SigningKeyCommand {
    /// Start signing with a new key; tokens signed by the old one stay valid
    /// until they expire, so nobody is logged out.
    Rotate,
}

#[derive(Clone, Copy, ValueEnum)]
enum RoleArg {
    Owner,
    Admin,
    Member,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Self {
        match r {
            RoleArg::Owner => Role::Owner,
            RoleArg::Admin => Role::Admin,
            RoleArg::Member => Role::Member,
        }
    }
}

#[derive(Subcommand)]
enum WorkspaceCommand {
    /// Create a workspace and its first live API key.
    Create {
        #[arg(long)]
        name: String,
        /// Enable voice calls.
        #[arg(long)]
        voice: bool,
        /// Starting live credit in cents (default: `billing.initial_live_credit_cents`).
        #[arg(long)]
        credit_cents: Option<i64>,
    },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Create an API key; its full value is printed once.
    Create {
        #[arg(long)]
        workspace: i64,
        #[arg(long, value_enum, default_value_t = ModeArg::Live)]
        mode: ModeArg,
        #[arg(long)]
        name: Option<String>,
        /// Restrict the key's MCP sessions to its own workspace.
        #[arg(long)]
        workspace_locked: bool,
    },
    /// Revoke an API key; it fails on its very next use.
    Revoke { id: i64 },
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Live,
    Test,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Live => Mode::Live,
            ModeArg::Test => Mode::Test,
        }
    }
}

fn main() {
    // Everything Parley writes (the database and its journal, recordings,
    // attachments, keys) is for the user running it alone.
    #[cfg(unix)]
    // SAFETY: umask only sets this process's file-creation mask; no threads exist yet.
    unsafe {
        libc::umask(0o077);
    }
    let cli = Cli::parse();
    if let Command::ExtractDocument { content_type, max_chars, max_inflated_bytes, seconds, memory_bytes } = cli.command
    {
        // No runtime, no settings: a reader that only reads.
        let request = parley_extract::child::Request {
            content_type,
            max_chars,
            max_inflated_bytes,
            time: std::time::Duration::from_secs(seconds),
            memory_bytes,
        };
        std::process::exit(parley_extract::child::run(&request));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    if let Err(e) = runtime.block_on(run(cli)) {
        eprintln!("{}", json!({ "error": format!("{e:#}") }));
        std::process::exit(1);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let mut settings = Settings::load(cli.config.as_deref())?;
    if let Some(url) = cli.database_url {
        settings.database_url = url;
    }
    let serving = matches!(cli.command, Command::Serve { .. } | Command::Openapi);
    if !serving && !cli.create {
        parley_server::require_existing_database(&settings)?;
    }
    match cli.command {
        Command::Serve { listen } => {
            if let Some(l) = listen {
                settings.listen = l;
            }
            let logging = init_logging(&settings)?;
            let db = open_database(&settings).await?;
            // Fail before the first start's banner if the master key is unusable.
            settings.master_key()?;
            if let Some(b) = workspaces::bootstrap(&db, &settings.services_config().billing).await? {
                use std::io::Write;
                let _ = write!(std::io::stdout().lock(), "{}", bootstrap_banner(&b));
            }
            let listener = tokio::net::TcpListener::bind(&settings.listen)
                .await
                .with_context(|| format!("could not listen on {}", settings.listen))?;
            tracing::info!(address = %listener.local_addr()?, database = %parley_server::describe_database(&settings), "Parley is listening");
            let served = serve(settings, db, listener, shutdown_signal()).await;
            tokio::task::spawn_blocking(move || logging.shutdown()).await?;
            served
        }
        Command::Migrate => {
            open_database(&settings).await?;
            print_json(&json!({ "migrated": true }));
            Ok(())
        }
        Command::Backup { to } => {
            // Connected, not migrated: a backup copies the database as it is.
            let db =
                parley_store::Db::connect(&settings.database_url, &settings.db_options()).await.with_context(|| {
                    format!("could not open the database at {}", parley_server::describe_database(&settings))
                })?;
            let started = std::time::Instant::now();
            let bytes = db.backup_to(&to).await.with_context(|| format!("could not back up to {}", to.display()));
            db.close().await;
            let path = std::fs::canonicalize(&to).unwrap_or(to);
            print_json(&json!({
                "backup": path.display().to_string(),
                "bytes": bytes?,
                "seconds": (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
                "integrity": "ok",
            }));
            Ok(())
        }
        Command::Workspace { command: WorkspaceCommand::Create { name, voice, credit_cents } } => {
            anyhow::ensure!(!name.trim().is_empty(), "--name must not be empty");
            let billing = settings.services_config().billing;
            let credit = credit_cents.unwrap_or(billing.initial_live_credit_cents);
            anyhow::ensure!(
                (0..=parley_services::billing::MAX_CREDIT_CENTS).contains(&credit),
                "--credit-cents must be between 0 and {}",
                parley_services::billing::MAX_CREDIT_CENTS
            );
            let services = parley_server::services(&settings, open_database(&settings).await?).await?;
            let created = services
                .transaction(async |work| workspaces::create_workspace(work, &name, voice, &billing, credit).await)
                .await?;
            let k = &created.live_key;
            print_json(&json!({
                "workspace": created.workspace,
                "api_key": {
                    "id": k.info.id,
                    "key": k.key.expose(),
                    "mode": k.info.mode,
                    "workspace_locked": k.info.workspace_locked,
                },
            }));
            Ok(())
        }
        Command::Key { command: KeyCommand::Create { workspace, mode, name, workspace_locked } } => {
            let services = parley_server::services(&settings, open_database(&settings).await?).await?;
            let mode = Mode::from(mode);
            let key = NewKey {
                workspace_id: workspace,
                mode,
                name: name.unwrap_or_else(|| format!("CLI {} key", mode.as_str())),
                workspace_locked,
                created_by: None,
                expires_at: None,
            };
            let created = services.transaction(async |work| workspaces::create_key(work, key).await).await?;
            print_json(&serde_json::to_value(&created)?);
            Ok(())
        }
        Command::Key { command: KeyCommand::Revoke { id } } => {
            let services = parley_server::services(&settings, open_database(&settings).await?).await?;
            let revoked = services.transaction(async |work| workspaces::revoke_key(work, ApiKeyId(id)).await).await?;
            print_json(&serde_json::to_value(&revoked)?);
            Ok(())
        }
        Command::User { command: UserCommand::Create { email, password_stdin: _, workspace, role } } => {
            let mut password = String::new();
            std::io::stdin().read_line(&mut password).context("could not read the password from standard input")?;
            let password = password.trim_end_matches(['\n', '\r']);
            let db = open_database(&settings).await?;
            let membership = workspace.zip(role.map(Role::from));
            let user = parley_services::tenancy::identity::create_user(&db, &email, password, membership).await?;
            let membership =
                membership.map(|(workspace_id, role)| json!({ "workspace_id": workspace_id, "role": role }));
            print_json(&json!({ "user": user, "membership": membership }));
            Ok(())
        }
        Command::User { command: UserCommand::ResetPassword { email } } => {
            warn_of_assumed_public_url(&settings);
            let services = parley_server::services(&settings, open_database(&settings).await?).await?;
            let link = members::reset_link(&services, &email).await?;
            print_json(&serde_json::to_value(&link)?);
            Ok(())
        }
        Command::User { command: UserCommand::Invite { workspace, email, role } } => {
            warn_of_assumed_public_url(&settings);
            let services = parley_server::services(&settings, open_database(&settings).await?).await?;
            let input =
                members::parse_invite(json!({ "email": email, "role": Role::from(role) })).map_err(|faults| {
                    let field = |f: &parley_domain::validation::FieldError| {
                        serde_json::to_value(&f.loc)
                            .ok()
                            .and_then(|l| l.as_array()?.last()?.as_str().map(str::to_owned))
                    };
                    let named: Vec<String> =
                        faults.iter().map(|f| format!("--{}: {}", field(f).unwrap_or_default(), f.msg)).collect();
                    anyhow::anyhow!("{}", named.join("; "))
                })?;
            let created = services
                .transaction(async |work| {
                    members::create_invitation(work, &services, WorkspaceId(workspace), None, input).await
                })
                .await?;
            print_json(&serde_json::to_value(&created)?);
            Ok(())
        }
        Command::SigningKey { command: SigningKeyCommand::Rotate } => {
            let db = open_database(&settings).await?;
            let services = parley_server::services(&settings, db).await?;
            let kid = parley_services::tenancy::identity::rotate_signing_key(&services).await?;
            print_json(&json!({ "kid": kid }));
            Ok(())
        }
        Command::Billing { command: BillingCommand::Credit { workspace, cents, mode, description } } => {
            anyhow::ensure!(
                (1..=parley_services::billing::MAX_CREDIT_CENTS).contains(&cents),
                "--cents must be between 1 and {}",
                parley_services::billing::MAX_CREDIT_CENTS
            );
            let services = parley_server::services(&settings, open_database(&settings).await?).await?;
            let scope = parley_domain::Scope::new(workspace, Mode::from(mode));
            let entry = parley_services::billing::grant_credit(&services, scope, cents, &description).await.map_err(
                |e| match e {
                    ServiceError::NotFound { .. } => anyhow::anyhow!("workspace {workspace} not found"),
                    e => e.into(),
                },
            )?;
            print_json(&json!({ "workspace_id": workspace, "mode": scope.mode, "transaction": entry }));
            Ok(())
        }
        Command::Billing { command: BillingCommand::Verify } => {
            let services = parley_server::services(&settings, open_database(&settings).await?).await?;
            let wrong = parley_services::billing::discrepancies(&services).await?;
            let report: Vec<_> = wrong
                .iter()
                .map(|d| {
                    json!({
                        "workspace_id": d.workspace_id,
                        "mode": Mode::from_livemode(d.livemode),
                        "balance_cents": d.balance_cents,
                        "ledger_sum_cents": d.ledger_sum_cents,
                        "held_cents": d.held_cents,
                        "holds_sum_cents": d.holds_sum_cents,
                    })
                })
                .collect();
            print_json(&json!({ "consistent": report.is_empty(), "discrepancies": report }));
            anyhow::ensure!(report.is_empty(), "the ledger and the stored balances disagree");
            Ok(())
        }
        Command::Openapi => {
            print_json(&serde_json::to_value(parley_api::openapi(&parley_services::agents::EngineNames::of(
                &settings.services_config(),
            )))?);
            Ok(())
        }
        Command::ExtractDocument { .. } => unreachable!("handled before the runtime starts"),
    }
}

/// A link printed by the CLI starts with `public_url`; unset, it is the
/// configured listen address, which may not be where the server runs or
/// where people reach it: say so beside the link (on stderr, so the JSON
/// stays clean).
fn warn_of_assumed_public_url(settings: &Settings) {
    if settings.public_url.is_none() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "note: public_url is not set, so the link starts with {}; if people open the dashboard elsewhere, \
             set PARLEY_PUBLIC_URL (or public_url in the configuration) and run this again",
            settings.public_url()
        );
    }
}

/// Prints a command's answer. A reader that went away (`parley openapi |
/// head`) is no error: the answer was not wanted past that point.
fn print_json(v: &serde_json::Value) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{}", serde_json::to_string_pretty(v).unwrap_or_default());
}
