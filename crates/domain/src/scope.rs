//! Workspaces hold two separate datasets, live and test (Stripe's model).

string_enum!(
    /// Which dataset a credential reads and writes.
    Mode {
        Live = "live",
        Test = "test",
    }
);

impl Mode {
    pub fn is_live(self) -> bool {
        self == Mode::Live
    }

    pub fn from_livemode(livemode: bool) -> Self {
        if livemode { Mode::Live } else { Mode::Test }
    }
}

/// The `(workspace, mode)` pair that every workspace-owned query filters on.
///
/// Repositories take a `Scope` as their first argument so that no query can
/// forget it; it is only ever built from an authenticated credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scope {
    pub workspace_id: i64,
    pub mode: Mode,
}

impl Scope {
    pub fn new(workspace_id: i64, mode: Mode) -> Self {
        Self { workspace_id, mode }
    }

    pub fn livemode(&self) -> bool {
        self.mode.is_live()
    }
}
