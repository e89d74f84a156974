//! The people a workspace talks to: contacts, their identities on each
//! channel, and CSV imports.

pub mod contact_import;
pub mod contacts;
