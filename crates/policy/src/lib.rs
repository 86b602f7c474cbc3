//! The tool gateway's session policy, and the evaluator that turns a tool call into a
//! verdict before the call runs.
//!
//! This crate is layer 0: it parses policy text it is given and judges calls it is shown,
//! with no I/O, no clock and no async. The gateway builds a [`ToolCall`] describing what a
//! call would touch (paths and how, the argv, the destination, the language), asks
//! [`Policy::evaluate`], and records the [`Verdict`] in the ledger whatever it is.
//!
//! - A [`Decision`] is ordered `allow < ask < deny`; the strictest objection wins, and the
//!   verdict names the rule that decided ([`evaluate::BUILTIN_RULES`] lists the built-in
//!   ones and their tie-breaking order).
//! - A client's policy is never used as sent: the server narrows it with [`Policy::within`]
//!   the operator's [`Ceilings`].
//! - Extra [`Rule`]s carry examples that [`Policy::validate`] checks when the policy loads,
//!   so a policy tests itself.
//!
//! ```
//! use forge_policy::{Ceilings, Decision, Policy, SessionUsage, ToolCall};
//!
//! let policy = Policy::from_toml(
//!     r#"
//!     network = { mode = "allowlist", hosts = ["pypi.org", "*.pythonhosted.org"] }
//!
//!     [[rules]]
//!     id = "ask-before-delete"
//!     decision = "ask"
//!     tool = "delete_path"
//!     reason = "a person confirms deletions"
//!     examples.matches = [{ tool = "delete_path", paths = [{ path = "/workspace/a", access = "write" }] }]
//!     "#,
//! )?
//! .within(&Ceilings::default());
//!
//! let usage = SessionUsage { calls: 3 };
//! let escape = ToolCall::new("write_file").write("/workspace/../etc/passwd");
//! let verdict = policy.evaluate(&escape, usage);
//! assert_eq!((verdict.decision, verdict.rule.as_str()), (Decision::Deny, "paths.writable"));
//!
//! let delete = ToolCall::new("delete_path").write("/workspace/build");
//! assert_eq!(policy.evaluate(&delete, usage).decision, Decision::Ask);
//! # Ok::<(), forge_policy::PolicyError>(())
//! ```

pub mod call;
pub mod catalog;
pub mod ceilings;
pub mod decision;
pub mod evaluate;
pub mod host;
pub mod path;
pub mod pattern;
pub mod policy;
pub mod rule;
pub mod secrets;

pub use call::{Access, Destination, PathUse, SessionUsage, ToolCall};
pub use ceilings::Ceilings;
pub use decision::{Decision, Verdict};
pub use host::{HostPattern, special_address};
pub use pattern::{Glob, PatternError};
pub use policy::{Network, Policy, PolicyError};
pub use rule::{Examples, Rule};
