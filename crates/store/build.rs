//! Rebuilds the crate when a migration is added or edited: `sqlx::migrate!` embeds the
//! `migrations/` folder at compile time, and cargo would not otherwise notice the change.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
