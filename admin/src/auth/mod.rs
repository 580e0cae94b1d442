//! Who may call `JobAdmin`, and what they may do.
//!
//! Every `JobAdmin` call resolves a [`Caller`] from its `authorization: Bearer <token>`
//! metadata ([`Authenticator::caller`]) and then asks it for one [`Permission`] in one
//! [`Scope`] ([`Caller::require`]); list calls keep only what [`Caller::may_read`] allows.
//! There is no other check: a new RPC picks its permission and scope, nothing more.
//!
//! With no users in the database, `JobAdmin` runs open (every caller acts as an admin) only
//! when the listener is on loopback or the operator set `insecure_open_admin_api`; the
//! startup check ([`startup::check`]) refuses the rest. Once a user exists every call needs a
//! token, on loopback too.

pub mod accounts;
pub mod caller;
pub mod secrets;
pub mod startup;

pub use caller::{Authenticator, Caller, Permission, ResolvedCaller, Scope};
